"""Errors in the OpenAI shape: ``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

import msgspec
from starlette.responses import Response

from swapos.serve.schemas import ErrorBody, ErrorResponse

TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    500: "server_error",
    503: "server_error",
}


class RequestError(Exception):
    """A request the server refuses or could not serve; becomes an OpenAI error response."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        *,
        code: str | None = None,
        kind: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.kind = kind or TYPES.get(status, "invalid_request_error")

    def body(self) -> bytes:
        return msgspec.json.encode(
            ErrorResponse(
                error=ErrorBody(
                    message=self.message, type=self.kind, param=self.param, code=self.code
                )
            )
        )

    def response(self) -> Response:
        headers = {"www-authenticate": "Bearer"} if self.status == 401 else None
        return Response(
            self.body(), status_code=self.status, media_type="application/json", headers=headers
        )
