package palimpsest

import (
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Violation is one BadRequest ("field"), PreconditionFailure ("precondition")
// or QuotaFailure ("quota") entry.
type Violation struct {
	Kind        string
	Field       string
	Type        string
	Subject     string
	Description string
}

// Error is a failed call with its google.rpc.Status details decoded.
type Error struct {
	// Code is the gRPC status; CodeName its name ("FAILED_PRECONDITION").
	Code     codes.Code
	CodeName string
	// Reason is the rule ID or documented reason ("HEAD_MISMATCH").
	Reason  string
	Domain  string
	Message string
	// Metadata is the ErrorInfo metadata ("index" names the failing event of a batch).
	Metadata   map[string]string
	Violations []Violation
}

func (e *Error) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("%s %s: %s", e.CodeName, e.Reason, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.CodeName, e.Message)
}

// codeName is the canonical upper-case name of a code (codes.Code.String is CamelCase).
var codeName = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN", codes.InvalidArgument: "INVALID_ARGUMENT",
	codes.DeadlineExceeded: "DEADLINE_EXCEEDED", codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED", codes.OutOfRange: "OUT_OF_RANGE",
	codes.Unimplemented: "UNIMPLEMENTED", codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE",
	codes.DataLoss: "DATA_LOSS", codes.Unauthenticated: "UNAUTHENTICATED",
}

// AsError decodes a gRPC error into *Error (nil stays nil; an *Error is returned as is).
func AsError(err error) error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	out := &Error{Code: st.Code(), CodeName: codeName[st.Code()], Message: st.Message(), Metadata: map[string]string{}}
	for _, d := range st.Details() {
		switch v := d.(type) {
		case *errdetails.ErrorInfo:
			out.Reason, out.Domain = v.GetReason(), v.GetDomain()
			for k, val := range v.GetMetadata() {
				out.Metadata[k] = val
			}
		case *errdetails.BadRequest:
			for _, f := range v.GetFieldViolations() {
				out.Violations = append(out.Violations, Violation{Kind: "field", Field: f.GetField(), Description: f.GetDescription()})
			}
		case *errdetails.PreconditionFailure:
			for _, f := range v.GetViolations() {
				out.Violations = append(out.Violations, Violation{Kind: "precondition", Type: f.GetType(), Subject: f.GetSubject(), Description: f.GetDescription()})
			}
		case *errdetails.QuotaFailure:
			for _, f := range v.GetViolations() {
				out.Violations = append(out.Violations, Violation{Kind: "quota", Subject: f.GetSubject(), Description: f.GetDescription()})
			}
		}
	}
	return out
}

// IsReason reports whether err is an *Error with the given reason.
func IsReason(err error, reason string) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.Reason == reason
}
