// Package webhooksender holds the webhook sender's drills (go test -tags
// drill: make drills-webhooks) and its events bench (go test -tags bench:
// make bench-events): the built sender, campaign dispatcher and
// provider-sim, with the test receiver (pkg/webhooks/webhooksim) in the
// test process.
package webhooksender
