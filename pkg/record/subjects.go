package record

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ReadSubject reads a company's campaign or automation by id, with its
// template and number: ErrNotFound when the company has no such subject.
func ReadSubject(ctx context.Context, db DB, companyID int64, kind string, id int64) (ReportSubject, error) {
	query, ok := subjectSQLs[kind]
	if !ok {
		return ReportSubject{}, fmt.Errorf("report of a %q: %w", kind, ErrNotFound)
	}
	s, err := scanSubject(db.QueryRow(ctx, query, companyID, id), nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return ReportSubject{}, fmt.Errorf("%s %d: %w", kind, id, ErrNotFound)
	}
	if err != nil {
		return ReportSubject{}, fmt.Errorf("read %s %d: %w", kind, id, err)
	}
	return s, nil
}

// scanSubject scans a subject's row of subjectSQLs or subjectListSQLs
// (id, name, template id, name and language, account id and name), and
// then extra.
func scanSubject(row pgx.Row, extra []any) (ReportSubject, error) {
	var s ReportSubject
	var tplID, acctID *int64
	var tplName, tplLang, acctName *string
	err := row.Scan(append([]any{&s.ID, &s.Name, &tplID, &tplName, &tplLang, &acctID, &acctName}, extra...)...)
	if err != nil {
		return ReportSubject{}, err
	}
	if tplID != nil {
		s.Template = &TemplateRef{ID: *tplID, Name: *tplName, Language: *tplLang}
	}
	if acctID != nil {
		s.MessagingAccount = &NamedRef{ID: *acctID, Name: *acctName}
	}
	return s, nil
}

// SubjectTotals is a campaign or automation as a list of them shows it: by
// name, with its template and number, and what its messages did at any
// time.
type SubjectTotals struct {
	ReportSubject
	// Active is an automation's switch; nil for a campaign.
	Active *bool `json:"active,omitempty"`
	Counts
	Rates Rates `json:"rates"`
	// Waiting is how many of its messages are not sent, failed, skipped
	// or cancelled yet.
	Waiting int64 `json:"waiting"`
	// LastActivity is the start of the last hour (UTC) in which one of its
	// messages changed; nil when none ever did.
	LastActivity *time.Time `json:"last_activity"`
}

// subjectCountersSQL sums a company's folded and unfolded counters of one
// subject kind ($2) by subject and metric, over all time, with the last
// hour each was counted in.
const subjectCountersSQL = `
WITH c AS (
	SELECT subject_id, metric, sum(n)::bigint AS n, max(hour) AS last FROM (
		SELECT subject_id, metric, n, hour FROM report_hours WHERE company_id = $1 AND subject_kind = $2
		UNION ALL
		SELECT subject_id, metric, n, hour FROM report_deltas WHERE company_id = $1 AND subject_kind = $2
	) x GROUP BY 1, 2
)`

// subjectListSQLs list a company's subjects of a kind by name, each with
// its template and number, whether it is active, and one row per metric
// it has counters of (NULLs when it has none).
var subjectListSQLs = map[string]string{
	SubjectCampaign: subjectCountersSQL + `
		SELECT s.id, s.name, t.id, t.name, t.language, a.id, a.name, NULL::boolean, c.metric, c.n, c.last
		FROM campaigns s JOIN templates t ON t.id = s.template_id JOIN messaging_accounts a ON a.id = s.messaging_account_id
		LEFT JOIN c ON c.subject_id = s.id
		WHERE s.company_id = $1 ORDER BY lower(s.name), s.id`,
	SubjectAutomation: subjectCountersSQL + `
		SELECT s.id, s.name, t.id, t.name, t.language, a.id, a.name, s.active, c.metric, c.n, c.last
		FROM automations s LEFT JOIN templates t ON t.id = s.template_id LEFT JOIN messaging_accounts a ON a.id = s.messaging_account_id
		LEFT JOIN c ON c.subject_id = s.id
		WHERE s.company_id = $1 ORDER BY lower(s.name), s.id`,
}

// ListSubjects lists a company's campaigns or automations (kind) by name,
// each with its counts over all time, from the report counters: like a
// report, it never counts messages. ErrNotFound for a kind that is neither.
func ListSubjects(ctx context.Context, db DB, companyID int64, kind string) ([]SubjectTotals, error) {
	query, ok := subjectListSQLs[kind]
	if !ok {
		return nil, fmt.Errorf("list of %q: %w", kind, ErrNotFound)
	}
	rows, err := db.Query(ctx, query, companyID, kind)
	if err != nil {
		return nil, fmt.Errorf("list %ss: %w", kind, err)
	}
	defer rows.Close()
	out := []SubjectTotals{}
	var left int64
	for rows.Next() {
		var active *bool
		var metric *string
		var n *int64
		var last *time.Time
		s, err := scanSubject(rows, []any{&active, &metric, &n, &last})
		if err != nil {
			return nil, fmt.Errorf("list %ss: %w", kind, err)
		}
		if len(out) == 0 || out[len(out)-1].ID != s.ID {
			if len(out) > 0 {
				out[len(out)-1].finish(left)
			}
			out, left = append(out, SubjectTotals{ReportSubject: s, Active: active}), 0
		}
		cur := &out[len(out)-1]
		if metric == nil {
			continue
		}
		cur.Counts.add(*metric, *n)
		if *metric == metricLeft {
			left += *n
		}
		if cur.LastActivity == nil || last.After(*cur.LastActivity) {
			cur.LastActivity = last
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list %ss: %w", kind, err)
	}
	if len(out) > 0 {
		out[len(out)-1].finish(left)
	}
	return out, nil
}

// finish computes what follows from the counts: the rates, and the
// messages waiting (accepted and not left).
func (s *SubjectTotals) finish(left int64) {
	s.Waiting = s.Accepted - left
	s.Rates = Rates{Delivered: ratio(s.Delivered, s.Sent), Read: ratio(s.Read, s.Delivered), Replied: ratio(s.Replied, s.Delivered)}
}
