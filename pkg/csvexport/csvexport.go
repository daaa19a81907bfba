// Package csvexport writes CSV files that people open in a spreadsheet:
// RFC 4180 (encoding/csv with CRLF line ends: fields quoted when they hold
// a comma, a quote or a line break, quotes doubled), UTF-8, and every cell
// a spreadsheet would run as a formula neutralised.
//
// # Formula injection
//
// A spreadsheet opening a CSV file evaluates a cell that starts with =, +,
// - or @ as a formula (and a leading TAB or CR can hide one), so a value an
// outsider chose (a contact's name, a provider's error title) could run a
// formula on the reader's machine (CWE-1236). Following OWASP's CSV
// injection advice, such a cell is written with a single quote (') before
// it, which spreadsheets read as "this is text". The quote is part of the
// value: a program reading the file gets it too, and strips it when it
// wants the raw value (Neutralise documents exactly when it is added).
//
// Phone numbers in E.164 start with +, so every phone cell gets the quote:
// '+14155550100. That is the point as much as a cost: without it Excel reads
// +14155550100 as the formula =+14155550100, shows 1.42E+10 and loses the +.
//
// # Byte order mark
//
// The files are UTF-8. Excel reads a CSV file without a byte order mark in
// the system's legacy code page (names with accents come out garbled), and
// with one it reads UTF-8; programs (encoding/csv, pandas without
// utf-8-sig, cut, awk) see the mark as part of the first header instead.
// So the mark is the caller's choice (Options.BOM): the console's
// downloads, opened by people, have it; the API's and parleyctl's, read by
// programs, do not (parleyctl has --bom).
package csvexport

import (
	"encoding/csv"
	"fmt"
	"io"
)

// BOM is the UTF-8 byte order mark.
const BOM = "\ufeff"

// Options tune a Writer.
type Options struct {
	// BOM writes the UTF-8 byte order mark before the first record, for
	// Excel.
	BOM bool
}

// Writer writes CSV records, neutralising every cell. Its output is
// buffered: Flush writes it out.
type Writer struct {
	out   io.Writer
	csv   *csv.Writer
	bom   bool
	cells []string
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer, o Options) *Writer {
	c := csv.NewWriter(w)
	c.UseCRLF = true
	return &Writer{out: w, csv: c, bom: o.BOM}
}

// Write writes one record, each cell neutralised (Neutralise). The cells
// are not kept.
func (w *Writer) Write(record []string) error {
	if w.bom {
		w.bom = false
		if _, err := io.WriteString(w.out, BOM); err != nil {
			return fmt.Errorf("write the byte order mark: %w", err)
		}
	}
	w.cells = w.cells[:0]
	for _, c := range record {
		w.cells = append(w.cells, Neutralise(c))
	}
	return w.csv.Write(w.cells)
}

// Flush writes the buffered records out and returns the first error any
// write met.
func (w *Writer) Flush() error {
	w.csv.Flush()
	return w.csv.Error()
}

// Neutralise returns s as a spreadsheet must show it, as text: with a
// single quote before it when it starts with =, +, -, @, a TAB or a CR;
// else unchanged (an empty cell stays empty).
func Neutralise(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}
