package bus

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bus/sendsv1"
)

// Group commit. The gateway commits many requests' batches of one kind in
// one stream message, a sendsv1.BatchGroup on <prefix>.<kind>.g.<group_id>,
// so that JetStream stores (and, with sync_interval always, flushes to
// disk) once per group instead of once per request. A batch's id names its
// group: the first 14 bytes of the UUID are the group's id and the last two
// its place in the group, so GET /api/batches/{id} finds a batch still in
// the stream with one lookup by subject, as it does a batch published alone.
//
// The ids stay UUIDv7 (RFC 9562): 48 bits of milliseconds, the version,
// 58 random bits and the variant, then the 16-bit index (the RFC's
// "dedicated counter bits"). Two gateways pick the same group id in the
// same millisecond with odds of about one in 2^58 per pair of groups; were
// it ever to happen, JetStream would report the second publish as a
// duplicate of the first and the gateway would answer its requests 503
// (its group commit, services/gateway/internal/accept, checks
// PubAck.Duplicate), never a 202 for a lost batch.

// GroupKinds are the subject kinds a group can carry, as ParseSubject reads
// them: one group holds batches of one kind, for the consumer of that kind.
const (
	KindCampaignBatches   = "campaign"
	KindAutomationBatches = "automation"
	KindMessageBatches    = "batch"
	KindReplyBatches      = "reply"
)

// SubjectKinds are the kinds of batch subject, in the order lookups try them.
var SubjectKinds = []string{KindCampaignBatches, KindAutomationBatches, KindMessageBatches, KindReplyBatches}

// MaxGroup is the most batches a group can hold (its index is 16 bits).
const MaxGroup = 1 << 16

const groupToken = "g"

// GroupID names a group of batches: the first 14 bytes of its batches' ids.
type GroupID [14]byte

// NewGroupID returns a fresh group id: UUIDv7's time and random bits.
func NewGroupID(now time.Time) (GroupID, error) {
	var g GroupID
	if _, err := rand.Read(g[6:]); err != nil {
		return GroupID{}, fmt.Errorf("group id: %w", err)
	}
	ms := uint64(now.UnixMilli())
	g[0], g[1], g[2], g[3], g[4], g[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	g[6] = g[6]&0x0f | 0x70 // version 7
	g[8] = g[8]&0x3f | 0x80 // variant 10
	return g, nil
}

// String is the group's token in its subject and its Nats-Msg-Id.
func (g GroupID) String() string { return hex.EncodeToString(g[:]) }

// BatchID is the id of the i-th batch of the group.
func (g GroupID) BatchID(i int) string {
	var u uuid.UUID
	copy(u[:], g[:])
	binary.BigEndian.PutUint16(u[14:], uint16(i))
	return u.String()
}

// GroupOf is the group a batch id names and its place in it; ok is false
// for a string that is not a UUID. Every UUID names some group: a batch
// published alone is simply not found in it.
func GroupOf(batchID string) (g GroupID, index int, ok bool) {
	u, err := uuid.Parse(batchID)
	if err != nil {
		return GroupID{}, 0, false
	}
	copy(g[:], u[:14])
	return g, int(binary.BigEndian.Uint16(u[14:])), true
}

// KindSubject is the subject of every company's batches of kind, without a
// company.
func (c Config) KindSubject(kind string) string { return c.Prefix + "." + kind }

// CompanySubject is where a company's batches of kind go when published
// alone (one batch per message, on ForBatch below it).
func (c Config) CompanySubject(kind string, companyID int64) string {
	return c.KindSubject(kind) + "." + strconv.FormatInt(companyID, 10)
}

// GroupSubject is where a group of batches of kind is published.
func (c Config) GroupSubject(kind string, g GroupID) string {
	return c.KindSubject(kind) + "." + groupToken + "." + g.String()
}

// EncodeGroup is the BatchGroup of encoded batches, appended to dst.
func EncodeGroup(dst []byte, batches [][]byte) []byte {
	for _, b := range batches {
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendBytes(dst, b)
	}
	return dst
}

// GroupSize is the encoded size of a group with these batch sizes.
func GroupSize(sizes ...int) int {
	n := 0
	for _, s := range sizes {
		n += protowire.SizeTag(1) + protowire.SizeBytes(s)
	}
	return n
}

// WithBatchID appends batch_id (field 1 of every batch message) to an
// encoded batch that does not set it. Protobuf reads a field wherever it
// comes in the encoding, so the gateway encodes a batch before its group
// gives it an id.
func WithBatchID(encoded []byte, batchID string) []byte {
	encoded = protowire.AppendTag(encoded, 1, protowire.BytesType)
	return protowire.AppendString(encoded, batchID)
}

// DecodeGroup reads a BatchGroup's encoded batches.
func DecodeGroup(data []byte) ([][]byte, error) {
	var g sendsv1.BatchGroup
	if err := proto.Unmarshal(data, &g); err != nil {
		return nil, fmt.Errorf("decode batch group: %w", err)
	}
	return g.GetBatches(), nil
}

// NewBatchMessage is an empty batch message of a subject kind.
func NewBatchMessage(kind string) (BatchMessage, error) {
	switch kind {
	case KindCampaignBatches:
		return &sendsv1.CampaignBatch{}, nil
	case KindAutomationBatches:
		return &sendsv1.AutomationBatch{}, nil
	case KindMessageBatches:
		return &sendsv1.MessageBatch{}, nil
	case KindReplyBatches:
		return &sendsv1.ReplyBatch{}, nil
	}
	return nil, fmt.Errorf("no batch message of kind %q", kind)
}

// BatchMessage is what every batch message of the SENDS stream says.
type BatchMessage interface {
	proto.Message
	GetBatchId() string
	GetCompanyId() int64
}

// ErrBatchNotInStream is a batch that is not waiting in the stream: never
// accepted, or already taken by a dispatcher.
var ErrBatchNotInStream = errors.New("batch not in the stream")

// FindBatch finds a company's batch waiting in the stream: in the group its
// id names, or published alone on its own subject (an Idempotency-Key retry
// of a hand-off that ended in doubt, or an older gateway). It returns the
// batch decoded and the kind of its subject; ErrBatchNotInStream when it is
// in neither. Any other error is the stream's.
func (c Config) FindBatch(ctx context.Context, s jetstream.Stream, companyID int64, batchID string) (BatchMessage, string, error) {
	g, index, ok := GroupOf(batchID)
	if !ok {
		return nil, "", ErrBatchNotInStream
	}
	for _, kind := range SubjectKinds {
		m, err := s.GetLastMsgForSubject(ctx, c.GroupSubject(kind, g))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		batches, err := DecodeGroup(m.Data)
		if err != nil {
			return nil, "", err
		}
		if index >= len(batches) {
			break
		}
		b, err := decodeBatch(kind, batches[index])
		if err != nil {
			return nil, "", err
		}
		if b.GetBatchId() == batchID && b.GetCompanyId() == companyID {
			return b, kind, nil
		}
		break
	}
	for _, kind := range SubjectKinds {
		subject := ForBatch(c.CompanySubject(kind, companyID), batchID)
		m, err := s.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		b, err := decodeBatch(kind, m.Data)
		if err != nil {
			return nil, "", err
		}
		return b, kind, nil
	}
	return nil, "", ErrBatchNotInStream
}

func decodeBatch(kind string, data []byte) (BatchMessage, error) {
	b, err := NewBatchMessage(kind)
	if err != nil {
		return nil, err
	}
	if err := proto.Unmarshal(data, b); err != nil {
		return nil, fmt.Errorf("decode %s batch: %w", kind, err)
	}
	return b, nil
}
