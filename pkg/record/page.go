package record

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// The listings (Messages, ListBatches, PhoneMessages) page alike: a page
// size from 1 to the listing's maximum, and an opaque cursor that holds the
// position of the last row listed. A position never changes (a message's
// seq or id, a batch's id), so a page follows the one before it whatever
// changed between them: no row is listed twice, and none that matches the
// filter throughout is skipped.

// pageSize is a listing's page size: given, or def when given is 0; an
// *InvalidError outside 1 to max.
func pageSize(given, def, max int) (int, error) {
	if given == 0 {
		return def, nil
	}
	if given < 1 || given > max {
		return 0, &InvalidError{Field: "limit", Input: given, Msg: fmt.Sprintf("limit must be between 1 and %d", max)}
	}
	return given, nil
}

// encodeCursor is the cursor of position in the listing scope (a batch's
// id, "batches", "phone:<number>"): base64url of "v1:<scope>:<position>".
func encodeCursor(scope, position string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("v1:" + scope + ":" + position))
}

// cursorAt returns the position of a cursor encodeCursor made for scope;
// ok is false for anything else.
func cursorAt(scope, c string) (position string, ok bool) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", false
	}
	position, ok = strings.CutPrefix(string(raw), "v1:"+scope+":")
	return position, ok && position != "" && !strings.Contains(position, ":")
}

// cursorInt returns the integer position (at least min, written as
// strconv writes it) of a cursor made for scope.
func cursorInt(scope, c string, min int64) (int64, bool) {
	position, ok := cursorAt(scope, c)
	n, err := strconv.ParseInt(position, 10, 64)
	return n, ok && err == nil && n >= min && strconv.FormatInt(n, 10) == position
}
