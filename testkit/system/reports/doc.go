// Package reports holds the reports' benchmark (make bench-reports): a
// campaign of ten million messages, and its report read through the real
// gateway.
package reports
