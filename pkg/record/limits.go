package record

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// OpenWindows returns which of phones have a customer service window open
// with the account's number: a message from them received after since
// (now less the window's length).
func OpenWindows(ctx context.Context, db DB, accountID int64, phones []string, since time.Time) (map[string]bool, error) {
	rows, err := db.Query(ctx, `SELECT phone FROM conversation_windows
		WHERE messaging_account_id = $1 AND phone = ANY($2::text[]) AND last_inbound_at > $3`, accountID, phones, since)
	if err != nil {
		return nil, fmt.Errorf("open windows of account %d: %w", accountID, err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("open windows of account %d: %w", accountID, err)
	}
	out := make(map[string]bool, len(list))
	for _, p := range list {
		out[p] = true
	}
	return out, nil
}

// AccountPortfolio returns the business portfolio a messaging account's
// number is in (its portfolio id, else its WhatsApp Business Account id,
// else its phone number id: each number its own portfolio) and the
// portfolio's messaging limit tier ("" when none is known: unlimited).
func AccountPortfolio(ctx context.Context, db DB, accountID int64) (id, tier string, err error) {
	err = db.QueryRow(ctx, `
		SELECT COALESCE(a.portfolio_id, a.waba_id, a.phone_number_id), COALESCE(p.tier, '')
		FROM messaging_accounts a
		LEFT JOIN portfolios p ON p.company_id = a.company_id AND p.portfolio_id = COALESCE(a.portfolio_id, a.waba_id, a.phone_number_id)
		WHERE a.id = $1`, accountID).Scan(&id, &tier)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", ErrNotFound
	}
	if err != nil {
		return "", "", fmt.Errorf("portfolio of account %d: %w", accountID, err)
	}
	return id, tier, nil
}
