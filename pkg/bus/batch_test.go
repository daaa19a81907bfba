package bus_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
)

// describeBatchCases is every message type with every way its source is
// written: empty, a legacy spelling, canonical, a connector.
var describeBatchCases = []struct {
	msg    proto.Message
	kind   bus.BatchKind
	source bus.Source
}{
	{&sendsv1.CampaignBatch{}, bus.BatchCampaign, bus.SourceCampaignsSend},
	{&sendsv1.CampaignBatch{Source: "api:campaigns/send"}, bus.BatchCampaign, bus.SourceCampaignsSend},
	{&sendsv1.CampaignBatch{Source: "api:campaigns_send"}, bus.BatchCampaign, bus.SourceCampaignsSend},
	{&sendsv1.AutomationBatch{}, bus.BatchAutomation, bus.SourceAutomationsSend},
	{&sendsv1.AutomationBatch{Source: "api:automations/send"}, bus.BatchAutomation, bus.SourceAutomationsSend},
	{&sendsv1.AutomationBatch{Source: "api:automations_send"}, bus.BatchAutomation, bus.SourceAutomationsSend},
	{&sendsv1.AutomationBatch{Source: "connector:shopify"}, bus.BatchConnector, bus.ConnectorSource("shopify")},
	{&sendsv1.MessageBatch{}, bus.BatchMessages, bus.SourceBatchSend},
	{&sendsv1.MessageBatch{Source: "api:batch/send"}, bus.BatchMessages, bus.SourceBatchSend},
	{&sendsv1.MessageBatch{Source: "api:batch_send"}, bus.BatchMessages, bus.SourceBatchSend},
	{&sendsv1.MessageBatch{Source: "connector:klaviyo"}, bus.BatchConnector, bus.ConnectorSource("klaviyo")},
	{&sendsv1.ReplyBatch{}, bus.BatchReply, bus.SourceMessagesSend},
	{&sendsv1.ReplyBatch{Source: "api:messages_send"}, bus.BatchReply, bus.SourceMessagesSend},
}

func TestDescribeBatch(t *testing.T) {
	kinds := map[bus.BatchKind]bool{}
	for _, c := range describeBatchCases {
		kind, source, err := bus.DescribeBatch(c.msg)
		if err != nil || kind != c.kind || source != c.source {
			t.Errorf("%T %v: %q %q %v; want %q %q", c.msg, c.msg, kind, source, err, c.kind, c.source)
		}
		kinds[kind] = true
	}
	for _, k := range bus.BatchKinds {
		if !kinds[k] {
			t.Errorf("kind %q has no case", k)
		}
	}
	if _, _, err := bus.DescribeBatch(&sendsv1.BatchMessage{}); err == nil {
		t.Error("a BatchMessage is not a batch")
	}
}

func TestSources(t *testing.T) {
	for written, want := range map[string]bus.Source{
		"api:campaigns/send": bus.SourceCampaignsSend, "api:campaigns_send": bus.SourceCampaignsSend,
		"api:automations/send": bus.SourceAutomationsSend, "api:batch/send": bus.SourceBatchSend,
		"connector:shopify": bus.ConnectorSource("shopify"), "": "",
	} {
		if got := bus.ParseSource(written); got != want {
			t.Errorf("ParseSource(%q) = %q, want %q", written, got, want)
		}
	}
	if name, ok := bus.ConnectorSource("shopify").Connector(); !ok || name != "shopify" {
		t.Errorf("connector source: %q %v", name, ok)
	}
	if _, ok := bus.SourceCampaignsSend.Connector(); ok {
		t.Error("an API source names no connector")
	}
}
