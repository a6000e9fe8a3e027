"""Market identity: (availability zone, instance type, product description)."""

from __future__ import annotations

from dataclasses import dataclass

from spotmarket.errors import PriceDataError

DEFAULT_PRODUCT = "Linux/UNIX"


@dataclass(frozen=True, slots=True, order=True)
class Market:
    """One spot market. ``str(m)`` is ``"AZ/TYPE/PRODUCT"``, e.g. ``us-east-1a/r3.large/Linux/UNIX``.

    The product description may itself contain ``/`` (``Linux/UNIX``), so parsing splits at most twice.
    """

    availability_zone: str
    instance_type: str
    product_description: str = DEFAULT_PRODUCT

    @property
    def region(self) -> str:
        """Region of the availability zone: ``us-east-1a`` -> ``us-east-1``."""
        az = self.availability_zone
        return az[:-1] if az and az[-1].isalpha() else az

    def __str__(self) -> str:
        return f"{self.availability_zone}/{self.instance_type}/{self.product_description}"

    @classmethod
    def parse(cls, text: str) -> "Market":
        """Parse ``AZ/TYPE[/PRODUCT]`` (product defaults to ``Linux/UNIX``).

        Parameters
        ----------
        text : str
            E.g. ``"us-east-1a/r4.large"`` or ``"us-east-1a/r4.large/Linux/UNIX (Amazon VPC)"``.

        Returns
        -------
        Market

        Raises
        ------
        PriceDataError
            If the text has no availability zone or no instance type.
        """
        parts = text.strip().split("/", 2)
        if len(parts) < 2 or not parts[0] or not parts[1]:
            raise PriceDataError(f"market {text!r} is not of the form AZ/TYPE[/PRODUCT]")
        product = parts[2] if len(parts) == 3 and parts[2] else DEFAULT_PRODUCT
        return cls(parts[0], parts[1], product)
