package whatsapp

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Floors of RetryAfter for the RetryLater class: the shortest wait before
// the same send is tried again, whatever Retry-After says.
const (
	// PairRateFloor follows 131056: Meta allows about one message every
	// 6 s from one number to one user, and repeated hits lengthen the
	// penalty; a minute clears it in practice.
	PairRateFloor = 60 * time.Second
	// AccountFloor follows account problems (expired token, locked or
	// unregistered number, payment): nothing the recipient did, nothing a
	// quick retry fixes, and every message of the account is stuck until a
	// person acts; the message stays pending instead of failing.
	AccountFloor = 5 * time.Minute
)

type codeRule struct {
	title string
	class Class
	floor time.Duration
}

// codes is the one table of the Cloud API error codes this client knows,
// with what a sender does about each. Codes not listed fall back on the
// HTTP status (see classify).
//
//	code          title                                    class       why
//	1, 2          API unknown / service unavailable        Retryable   transient on Meta's side
//	130429        Rate limit hit (throughput)              Retryable   back off and retry soon
//	131000        Something went wrong                     Retryable   Meta's generic 500
//	131016        Service unavailable                      Retryable
//	4, 80007      App / WABA rate limit                    RetryLater  limit per hour: PairRateFloor
//	131048        Spam rate limit hit                      RetryLater  quality limit: AccountFloor
//	131056        Pair rate limit (same user, too soon)    RetryLater  PairRateFloor
//	190, HTTP 401 Access token expired or invalid          RetryLater  account problem: AccountFloor
//	3, 10, 200    Capability / permission denied           RetryLater  account problem: AccountFloor
//	368           Temporarily blocked (policy)             RetryLater  account problem: AccountFloor
//	131005        Access denied                            RetryLater  account problem: AccountFloor
//	131031        Business account locked                  RetryLater  account problem: AccountFloor
//	131042        Payment issue                            RetryLater  account problem: AccountFloor
//	131045        Phone number registration error          RetryLater  account problem: AccountFloor
//	131057        Account in maintenance mode              RetryLater  account problem: AccountFloor
//	133010        Phone number not registered              RetryLater  account problem: AccountFloor
//	100 + sub 33  Unknown phone number id (object)         RetryLater  account problem: AccountFloor
//	33, 100       Invalid parameter                        Permanent   the request is wrong
//	130472        User's number is part of an experiment   Permanent
//	130497        Country restricted for this business     Permanent
//	131008        Required parameter missing               Permanent
//	131009        Parameter value not valid                Permanent
//	131021        Recipient cannot be sender               Permanent
//	131026        Message undeliverable                    Permanent   not on WhatsApp, old app, ...
//	131037        Display name not approved                Permanent
//	131047        Re-engagement message (24 h window)      Permanent
//	131049        Meta chose not to deliver (marketing)    Permanent   per-user marketing limit
//	131050        User stopped marketing messages          Permanent
//	131051        Unsupported message type                 Permanent
//	131052, 53    Media download / upload error            Permanent
//	132000        Template parameter count mismatch        Permanent
//	132001        Template does not exist                  Permanent
//	132005        Translated text too long                 Permanent
//	132007        Template format policy violated          Permanent
//	132012        Parameter format mismatch                Permanent
//	132015, 16    Template paused / disabled               Permanent   not sendable now; the
//	                                                                    campaign is at fault, not
//	                                                                    the network
//	135000        Generic user error                       Permanent
var codes = map[int]codeRule{
	1:      {"API unknown", Retryable, 0},
	2:      {"API service", Retryable, 0},
	130429: {"Rate limit hit", Retryable, 0},
	131000: {"Something went wrong", Retryable, 0},
	131016: {"Service unavailable", Retryable, 0},

	4:      {"API too many calls", RetryLater, PairRateFloor},
	80007:  {"Rate limit issues", RetryLater, PairRateFloor},
	131048: {"Spam rate limit hit", RetryLater, AccountFloor},
	131056: {"(Business Account, Consumer Account) pair rate limit hit", RetryLater, PairRateFloor},
	3:      {"API method", RetryLater, AccountFloor},
	10:     {"Permission denied", RetryLater, AccountFloor},
	190:    {"Access token has expired", RetryLater, AccountFloor},
	200:    {"API permission", RetryLater, AccountFloor},
	368:    {"Temporarily blocked for policies violations", RetryLater, AccountFloor},
	131005: {"Access denied", RetryLater, AccountFloor},
	131031: {"Account has been locked", RetryLater, AccountFloor},
	131042: {"Business eligibility payment issue", RetryLater, AccountFloor},
	131045: {"Incorrect certificate", RetryLater, AccountFloor},
	131057: {"Account in maintenance mode", RetryLater, AccountFloor},
	133010: {"Phone number not registered", RetryLater, AccountFloor},

	33:     {"Parameter value is not valid", Permanent, 0},
	100:    {"Invalid parameter", Permanent, 0},
	130472: {"User's number is part of an experiment", Permanent, 0},
	130497: {"Business account is restricted from messaging users in this country", Permanent, 0},
	131008: {"Required parameter is missing", Permanent, 0},
	131009: {"Parameter value is not valid", Permanent, 0},
	131021: {"Recipient cannot be sender", Permanent, 0},
	131026: {"Message undeliverable", Permanent, 0},
	131037: {"Display name approval needed", Permanent, 0},
	131047: {"Re-engagement message", Permanent, 0},
	131049: {"Meta chose not to deliver", Permanent, 0},
	131050: {"User has stopped marketing messages", Permanent, 0},
	131051: {"Unsupported message type", Permanent, 0},
	131052: {"Media download error", Permanent, 0},
	131053: {"Media upload error", Permanent, 0},
	132000: {"Template param count mismatch", Permanent, 0},
	132001: {"Template does not exist", Permanent, 0},
	132005: {"Template hydrated text too long", Permanent, 0},
	132007: {"Template format character policy violated", Permanent, 0},
	132012: {"Template parameter format mismatch", Permanent, 0},
	132015: {"Template is paused", Permanent, 0},
	132016: {"Template is disabled", Permanent, 0},
	135000: {"Generic user error", Permanent, 0},
}

// subcodeUnknownObject with code 100: the phone number id does not exist or
// the token may not use it, a misconfigured account rather than a bad
// message.
const subcodeUnknownObject = 33

// classify decides what a caller does about a provider error: by code when
// the code is in the table (codes 200-299 are all permission errors), else
// by HTTP status: 5xx and 429 are Retryable, 401 and 403 are account
// problems (RetryLater), any other 4xx is Permanent, and an unknown code
// of a status webhook (no HTTP status) is Permanent.
func classify(httpStatus, code, subcode int) (Class, time.Duration, string) {
	if code == 100 && subcode == subcodeUnknownObject {
		return RetryLater, AccountFloor, "Unknown phone number id"
	}
	if r, ok := codes[code]; ok {
		return r.class, r.floor, r.title
	}
	if code >= 200 && code <= 299 {
		r := codes[200]
		return r.class, r.floor, r.title
	}
	switch {
	case httpStatus == 0:
		// From a status webhook: Meta has already given up on the message.
		return Permanent, 0, "Unknown error"
	case httpStatus >= 500, httpStatus == http.StatusTooManyRequests:
		return Retryable, 0, http.StatusText(httpStatus)
	case httpStatus == http.StatusUnauthorized, httpStatus == http.StatusForbidden:
		return RetryLater, AccountFloor, http.StatusText(httpStatus)
	case httpStatus >= 400:
		return Permanent, 0, http.StatusText(httpStatus)
	}
	return Retryable, 0, http.StatusText(httpStatus)
}

// ClassifyCode is the table's answer for a code (and subcode, 0 if none)
// the provider gave with an HTTP status (0 when it came in a status
// webhook): the class and the floor of the wait before a retry.
func ClassifyCode(httpStatus, code, subcode int) (Class, time.Duration) {
	c, floor, _ := classify(httpStatus, code, subcode)
	return c, floor
}

// Classify says what to do about any error of SendTemplate: the class of an
// *Error, Permanent for a *RenderError, Retryable for anything else (the
// message may not have reached the provider).
func Classify(err error) Class {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Class
	}
	if errors.Is(err, ErrInvalidMessage) {
		return Permanent
	}
	return Retryable
}

// parseRetryAfter reads Retry-After in seconds or as an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
