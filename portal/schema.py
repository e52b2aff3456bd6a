"""The OpenAPI schema documents every status the API can answer, not only the successes drf-spectacular infers: a
postprocessing hook adds the errors that the stack answers to any operation (the fuzzer found 95 undocumented):
- 400 when the request carries a body or parameters (validation: `{"field": ["message"]}` or `{"detail": ...}`);
- 401 without valid credentials, 403 when the role may not, 429 when throttled (with Retry-After);
- 404 when the path or a parameter names an object that does not exist (or that the caller may not see);
- 409 where a write can meet an existing row (a duplicate, or a delete refused because records refer to it);
- 413 and 415 for bodies (too large, or not JSON / the documented type).
Every error body is an object: `{"detail": "..."}` or fields with their messages (the Error component).

It also says three things of requests that the views check but drf-spectacular cannot see: a text query parameter
holds no NUL byte (PostgreSQL stores none: a 400); a query parameter of choices may be empty, which filters nothing
(`?state=`, as the pages' forms send it); a body the view reads itself (the ingest batches) is required."""

from __future__ import annotations

from typing import Any

ERROR_SCHEMA = {
    "type": "object",
    "description": '{"detail": "why"}, or each field with its messages: {"field": ["message", ...]}',
    "properties": {"detail": {"type": "string"}},
    "additionalProperties": True,
}

_DESCRIPTIONS = {
    "400": "The request is not valid: the body or the parameters, with the reason per field",
    "401": "No credentials, or a token that is unknown, expired or revoked",
    "403": "The caller's role may not do this",
    "404": "No such object, or none the caller may see",
    "409": "Conflicts with what is stored (a duplicate, or rows that still refer to it)",
    "413": "The body is larger than the server takes",
    "415": "The body's media type is not one this operation reads",
    "429": "Too many requests: throttled (see Retry-After)",
}
_BODY_METHODS = {"post", "put", "patch"}
NO_NUL = "^[^\\u0000]*$"  # a JSON Schema (ECMA 262) pattern: no NUL anywhere
REQUIRED_BODY_PATHS = ("/api/v1/ingest/",)


def error_responses_document(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular POSTPROCESSING_HOOKS entry: add the error responses each operation can give."""
    components = result.setdefault("components", {}).setdefault("schemas", {})
    components.setdefault("Error", ERROR_SCHEMA)
    reference = {"$ref": "#/components/schemas/Error"}
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if method not in {"get", "post", "put", "patch", "delete", "head", "options"}:
                continue
            codes = {"401", "403", "429"}
            if method in _BODY_METHODS or operation.get("parameters"):
                codes.add("400")
            if "{" in path or operation.get("parameters"):
                codes.add("404")  # the path's object, or one a parameter names (?experiment=, ?challenge=)
            if method in _BODY_METHODS:
                codes |= {"413", "415"}
            if method in _BODY_METHODS | {"delete"}:
                codes.add("409")
            _requests_document(path, method, operation)
            responses = operation.setdefault("responses", {})
            for code in sorted(codes):
                responses.setdefault(
                    code, {"description": _DESCRIPTIONS[code], "content": {"application/json": {"schema": reference}}}
                )
    return result


def _requests_document(path: str, method: str, operation: dict[str, Any]) -> None:
    for parameter in operation.get("parameters", []):
        schema = parameter.get("schema", {})
        plain_text = schema.get("type") == "string" and not {"enum", "pattern", "format"} & set(schema)
        if parameter.get("in") == "query" and plain_text:
            schema["pattern"] = NO_NUL
        if parameter.get("in") == "query" and schema.get("type") == "string" and "" not in schema.get("enum", [""]):
            schema["enum"] = [*schema["enum"], ""]
    if method in _BODY_METHODS and path.startswith(REQUIRED_BODY_PATHS) and "requestBody" in operation:
        operation["requestBody"]["required"] = True
