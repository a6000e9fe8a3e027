# The spottune worker image: one trial segment per EC2 spot instance.
# The user data of every instance runs: docker run --rm --network host IMAGE --segment s3://.../<launch>.json
# Build and push to ECR: docs/guide/aws.md. Linted by hadolint in tests/test_dockerfile.py.
FROM python:3.11.7-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The pinned CPU build of torch first (the default index would pull a multi-GB CUDA build).
RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu torch==2.13.0

WORKDIR /opt/spottune
COPY pyproject.toml README.md ./
COPY spotmarket ./spotmarket
COPY revpred ./revpred
COPY provisioner ./provisioner
COPY earlycurve ./earlycurve
COPY spottune ./spottune
COPY data ./data
RUN pip install --no-cache-dir . \
    && useradd --create-home --uid 10001 spottune

USER 10001
# The agent restores from S3, polls IMDSv2 (hop limit 2 reaches it from the container), relays the
# worker's reports to SQS and powers nothing off itself: the user data shuts the host down after it exits.
ENTRYPOINT ["python", "-m", "spottune.backends.aws.agent"]
