package csvexport

import (
	"errors"
	"net/http"
	"strings"
	"time"
)

// ContentType is the Content-Type of a CSV answer.
const ContentType = "text/csv; charset=utf-8"

// A Response flushes at least every FlushEvery while records come, and
// gives the client WriteTimeout to take each flush.
const (
	FlushEvery   = time.Second
	WriteTimeout = 30 * time.Second
)

// Response streams a CSV file as the answer to an HTTP request, records
// going out as they are written: nothing is held but a buffer. Its status
// (200) and headers go with the first record, so that a caller that fails
// before it can still answer an error; from then on (Started), only
// cutting the connection (panic(http.ErrAbortHandler)) tells the client
// that the file is not whole.
//
// A download may outlive the server's write timeout, which is meant for
// small answers: each flush moves the write deadline WriteTimeout on, so a
// client that stops reading is cut off, and one that reads is not. (The
// read timeout does not matter: net/http lifts the read deadline once a
// request without a body is read.)
type Response struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	csv      *Writer
	filename string
	header   []string
	started  bool
	last     time.Time
}

// NewResponse streams to w a file to save as filename (characters other
// than ASCII letters, digits, '.', '-' and '_' become '_'), whose first
// record is header.
func NewResponse(w http.ResponseWriter, filename string, header []string, o Options) *Response {
	return &Response{w: w, rc: http.NewResponseController(w), csv: NewWriter(w, o), filename: safeFilename(filename), header: header}
}

// Started reports whether the status was sent.
func (r *Response) Started() bool { return r.started }

// Write writes one record (neutralised, as Writer does), starting the
// answer first if it is not.
func (r *Response) Write(record []string) error {
	due := time.Since(r.last) >= FlushEvery
	if due || !r.started {
		if err := r.extend(); err != nil {
			return err
		}
	}
	if err := r.begin(); err != nil {
		return err
	}
	if err := r.csv.Write(record); err != nil {
		return err
	}
	if due {
		return r.flush()
	}
	return nil
}

// Close sends what is buffered; with no record written, the answer is
// the header alone.
func (r *Response) Close() error {
	if err := r.extend(); err != nil {
		return err
	}
	if err := r.begin(); err != nil {
		return err
	}
	return r.flush()
}

// begin starts the answer with its header row, once.
func (r *Response) begin() error {
	if r.started {
		return nil
	}
	r.start()
	return r.csv.Write(r.header)
}

func (r *Response) start() {
	r.started = true
	h := r.w.Header()
	h.Set("Content-Type", ContentType)
	h.Set("Content-Disposition", `attachment; filename="`+r.filename+`"`)
	h.Del("Content-Length")
	r.w.WriteHeader(http.StatusOK)
}

func (r *Response) extend() error {
	err := r.rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

func (r *Response) flush() error {
	if err := r.csv.Flush(); err != nil {
		return err
	}
	r.last = time.Now()
	if err := r.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// safeFilename keeps a name a quoted Content-Disposition parameter holds
// as is, in any browser.
func safeFilename(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}
