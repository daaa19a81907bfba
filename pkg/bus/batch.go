package bus

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bus/sendsv1"
)

// BatchKind is what a batch is, as the batches table records it and GET
// /api/batches/{id} reports it. DescribeBatch decides it, for the gateway's
// view of a batch still in the stream and for the dispatcher that records
// it alike.
type BatchKind string

// The kinds of batch (the batch_kind enum of the database).
const (
	BatchCampaign   BatchKind = "campaign"   // POST /api/campaigns/send
	BatchAutomation BatchKind = "automation" // POST /api/automations/send
	BatchMessages   BatchKind = "batch"      // POST /api/batch/send
	BatchConnector  BatchKind = "connector"  // POST /api/{connector}/send, whatever its target
	BatchReply      BatchKind = "reply"      // POST /api/messages: one message to one contact
)

// BatchKinds is every kind.
var BatchKinds = []BatchKind{BatchCampaign, BatchAutomation, BatchMessages, BatchConnector, BatchReply}

// Source is what asked for a batch, recorded with it: an endpoint of the API
// ("api:campaigns_send") or a connector ("connector:shopify").
type Source string

// The API's sources. These spellings are canonical: the gateway writes them
// and GET /api/batches/{id} reports them.
const (
	SourceCampaignsSend   Source = "api:campaigns_send"
	SourceAutomationsSend Source = "api:automations_send"
	SourceBatchSend       Source = "api:batch_send"
	SourceMessagesSend    Source = "api:messages_send"
)

const connectorPrefix = "connector:"

// ConnectorSource is the source of a send through the named connector.
func ConnectorSource(name string) Source { return Source(connectorPrefix + name) }

// Connector is the connector's name of a connector source; ok is false for
// any other source.
func (s Source) Connector() (name string, ok bool) {
	return strings.CutPrefix(string(s), connectorPrefix)
}

// legacySources are spellings that the proto's comments and the
// dispatchers' defaults used before the canonical ones were fixed. Batches
// already in a stream or recorded may carry them; they read as their
// canonical spelling.
var legacySources = map[string]Source{
	"api:campaigns/send":   SourceCampaignsSend,
	"api:automations/send": SourceAutomationsSend,
	"api:batch/send":       SourceBatchSend,
}

// ParseSource reads a source as written (in a batch message or a recorded
// batch): a legacy spelling becomes its canonical one; anything else is
// kept as it is.
func ParseSource(s string) Source {
	if c, ok := legacySources[s]; ok {
		return c
	}
	return Source(s)
}

// Spellings are the ways a source may be recorded: itself, and the legacy
// spellings that read as it.
func (s Source) Spellings() []string {
	out := []string{string(s)}
	for legacy, canonical := range legacySources {
		if canonical == s {
			out = append(out, legacy)
		}
	}
	return out
}

// DescribeBatch decides a batch's kind and source from the message that
// carries it (*sendsv1.CampaignBatch, *sendsv1.AutomationBatch or
// *sendsv1.MessageBatch) and that message's source field:
//   - the source is read with ParseSource; an empty one (an older publisher,
//     a tool) is the API endpoint that publishes that message;
//   - a connector's batch is of kind connector, whichever message carries it;
//   - any other batch is of its message's kind: campaign, automation, or
//     batch for a MessageBatch.
func DescribeBatch(m proto.Message) (BatchKind, Source, error) {
	var kind BatchKind
	var def Source
	var written string
	switch b := m.(type) {
	case *sendsv1.CampaignBatch:
		kind, def, written = BatchCampaign, SourceCampaignsSend, b.GetSource()
	case *sendsv1.AutomationBatch:
		kind, def, written = BatchAutomation, SourceAutomationsSend, b.GetSource()
	case *sendsv1.MessageBatch:
		kind, def, written = BatchMessages, SourceBatchSend, b.GetSource()
	case *sendsv1.ReplyBatch:
		kind, def, written = BatchReply, SourceMessagesSend, b.GetSource()
	default:
		return "", "", fmt.Errorf("%T is not a batch message", m)
	}
	src := def
	if written != "" {
		src = ParseSource(written)
	}
	if _, ok := src.Connector(); ok {
		kind = BatchConnector
	}
	return kind, src, nil
}
