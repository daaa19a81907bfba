// Package campaign holds the crash drills (go test -tags drill: make drills)
// and the delivery bench (go test -tags bench: make bench-delivery) of the
// campaign dispatcher, run against its built binary, provider-sim and the
// drill harness testkit/drillenv. Its test files are all the package has.
package campaign
