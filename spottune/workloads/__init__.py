"""Built-in workloads: real training jobs on data that ships with scikit-learn (they run offline).

=============  ==========================================  ==============  ======  =========  ========
name           model / data                                metric (min)    steps   s/step*    ckpt MB*
=============  ==========================================  ==============  ======  =========  ========
digits-mlp     torch MLP, SGD + step decay, digits          val cross-ent.  300     60         100
logreg         logistic regression, SGD, breast_cancer     val cross-ent.  1000    12         0.1
linreg         linear regression, SGD, diabetes            val MSE         500     20         0.01
linear-svm     linear SVM, hinge + L2, SGD, breast_cancer  val hinge       500     20         0.1
gbt            gradient-boosted trees, 1 tree/step, diab.  val MSE         200     60         1
=============  ==========================================  ==============  ======  =========  ========

\\* simulated: seconds per step on the 2-vCPU reference instance and checkpoint size, chosen to match
the paper's Table II workloads (ResNet/CIFAR-10, LoR/Epsilon, LiR/YearPredictionMSD, SVM and GBTR on
synthetic data) so a trial spans hours of simulated time; see ``docs/guide/trainable.md``. The real models
are small: one real step takes about 0.05-3 ms of CPU.

Every search space has 16 configurations (the paper's grids are lost; decision D13 - invented grids,
documented in each module).
"""

from spottune.workloads._registry import Workload, get_workload, list_workloads

__all__ = ["Workload", "get_workload", "list_workloads"]
