// Package automation holds the automation part of the delivery bench (go
// test -tags bench: make bench-delivery): the automation dispatcher's
// trigger latency during a campaign backlog, with the built binaries.
package automation
