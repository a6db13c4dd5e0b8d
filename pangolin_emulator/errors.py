"""The one exception handlers raise to answer with an error envelope."""

from __future__ import annotations

__all__ = ["INTERNAL", "ApiError", "not_found"]


class ApiError(Exception):
    """An error answer: HTTP status plus the `message` of Pangolin's error envelope."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def not_found(kind: str, raw_id: object) -> ApiError:
    """404 in the wording of Pangolin's access middlewares, e.g. "Resource with ID 9 not found"."""
    return ApiError(404, f"{kind} with ID {raw_id} not found")


INTERNAL = "An error occurred"
