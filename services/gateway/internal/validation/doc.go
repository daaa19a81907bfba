// Package validation decodes and validates the gateway's JSON request bodies
// (and the one integer path parameter, segment_id) and produces, byte for
// byte, the 422 body a FastAPI service with pydantic 2 answers for the same
// request (spec 2.2, 2.3, 4.2, 7.2, 8). The models of the endpoints the spec
// leaves open (segments, batch send, connector send, campaign to a segment)
// are declared in testdata/gen_reference.py as pydantic models, so that
// their answers are pydantic's too.
//
// # Pipeline
//
// Decode reproduces FastAPI's handling of a single body parameter:
//
//  1. An empty body is pydantic's "missing" error at ["body"].
//  2. The bytes are decoded the way json.loads(bytes) does (UTF-8, UTF-8
//     with BOM, UTF-16/32 by BOM or NUL pattern, errors="surrogatepass") and
//     scanned by a port of CPython's C JSON scanner: same accepted language
//     (NaN, Infinity, -Infinity, big integers, duplicate keys keeping the
//     last value at the first key's position), same error messages at the
//     same character positions. A decode error is FastAPI's json_invalid
//     item; bytes that are not text are ErrBodyNotUTF8 (FastAPI's 400).
//     A top-level null is the same "missing" error as an empty body.
//  3. The document is validated as TypeAdapter(Model).validate_python(obj,
//     from_attributes=True) does in lax mode: the declarative schema in
//     schema.go (Int, Bool, String, OrNull, ListOf, StringMap,
//     DateTimeString, NewModel) mirrors pydantic-core's coercions, error
//     types, messages, contexts and order. Extra keys are ignored.
//     Model.After is a model_validator(mode="after") raising
//     PydanticCustomError; RequiredUnless is a field required unless another
//     is given (see the campaign model in gen_reference.py).
//  4. Errors are written as FastAPI's request_validation_exception_handler
//     writes them: jsonable_encoder (which drops dict keys starting with
//     "_sa"), then json.dumps(ensure_ascii=False, allow_nan=False,
//     separators=(",", ":")): floats in Python's repr, non-ASCII as raw
//     UTF-8, keys in input order.
//  5. A path parameter (DecodeSegmentContacts) is validated as FastAPI
//     validates an int path parameter; its items come before the body's, as
//     solve_dependencies collects them, except when the body does not even
//     parse (that answer comes alone, before the path is looked at).
//
// For a Content-Type that is not JSON (IsJSONContentType), FastAPI validates
// the raw bytes as the model input; NonJSONBody gives that answer.
//
// # Where the gateway differs from FastAPI, on purpose
//
//   - Phone numbers match on ASCII digits only (PhonePattern); pydantic's
//     \d also matches other scripts' digits. The error is pydantic's own
//     string_pattern_mismatch with the spec's pattern.
//   - NaN and ±Infinity in an echoed input are written as null (as
//     JavaScript's JSON.stringify does); FastAPI fails with a 500 there.
//   - A lone surrogate (from a \udXXX escape or surrogatepass-decoded
//     bytes) in an echoed value is written as a \udXXX escape, which keeps
//     the body valid UTF-8 JSON; FastAPI fails with a 500 there. Such a
//     string never passes validation (string_unicode), as in pydantic.
//   - Arrays and objects nested deeper than 512 are ErrBodyUnparseable (a
//     400). CPython stops with RecursionError (FastAPI's 400) at a depth
//     that depends on the stack, near 1000.
//   - A non-JSON body that is not UTF-8 is ErrBodyNotUTF8 (400); FastAPI
//     fails with a 500 writing its echo.
//   - Identifiers outside int64 are valid ints to pydantic; they decode to
//     UnknownID (0), which no row has, so the lookup answers 404.
//   - A path parameter that is not UTF-8 (a percent-encoded byte) is echoed
//     with U+FFFD in place of the bad bytes.
//
// # Reference table
//
// The behaviour mirrored is that of CPython 3.11/3.12 and pydantic 2.13
// (pydantic-core 2.46). testdata/gen_reference.py reproduces the pipeline
// with python3 and pydantic (no FastAPI needed), policies included, and writes
// testdata/reference.json; TestReference replays every case and fails when
// the table was not regenerated after the script changed. To regenerate:
//
//	cd services/gateway/internal/validation/testdata && python3 gen_reference.py
//
// TestDifferential compares generated bodies against the script directly
// (5,000 with seed 1); it runs wherever python3 is CPython 3.11/3.12 with
// pydantic 2.13, and PARLEY_VALIDATION_PYTHON makes it required.
package validation
