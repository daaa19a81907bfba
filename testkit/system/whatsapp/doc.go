// Package whatsapp holds the drills of WhatsApp's rules (go test -tags
// drill: make drills-whatsapp): a template paused and approved again, a
// template disabled, the business portfolio's messaging limit and the pair
// rate, each run through the built gateway, dispatchers and provider-sim
// with its rules as strict as Meta's documents, and counted at provider-sim
// per recipient. Its test files are all the package has.
package whatsapp
