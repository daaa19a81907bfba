package loadtest

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/secretbox"
)

// Tenant is one provisioned company: its key and a campaign to send.
type Tenant struct {
	CompanyID  int64
	CampaignID int64
	Key        string
}

// Provision creates n subscribed, provisioned companies, each with a
// messaging account, a template, a campaign and an active API key, in a few
// set-based statements.
func Provision(ctx context.Context, pool *pgxpool.Pool, n int, tag string) ([]Tenant, error) {
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		return nil, err
	}
	token, err := box.Seal("bench-token")
	if err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, `
		WITH c AS (
			INSERT INTO companies (slug, name, subscription_active, provisioned)
			SELECT $2 || '-' || i, 'Bench ' || i, true, true FROM generate_series(1, $1) i
			RETURNING id),
		a AS (
			INSERT INTO messaging_accounts (company_id, name, phone_number_id, access_token_encrypted)
			SELECT id, 'bench', (9000000000 + id)::text, $3 FROM c RETURNING id, company_id),
		t AS (
			INSERT INTO templates (company_id, name) SELECT id, 'bench' FROM c RETURNING id, company_id)
		INSERT INTO campaigns (company_id, name, template_id, messaging_account_id)
		SELECT a.company_id, 'bench', t.id, a.id FROM a JOIN t USING (company_id)
		RETURNING company_id, id`, n, "bench-"+strings.ToLower(tag), token)
	if err != nil {
		return nil, fmt.Errorf("provision companies: %w", err)
	}
	var tenants []Tenant
	for rows.Next() {
		var t Tenant
		if err := rows.Scan(&t.CompanyID, &t.CampaignID); err != nil {
			return nil, err
		}
		tenants = append(tenants, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("provision companies: %w", err)
	}
	companies, keyIDs, hints := make([]int64, n), make([]string, n), make([]string, n)
	hashes := make([][]byte, n)
	for i := range tenants {
		full, p, err := apikey.Generate()
		if err != nil {
			return nil, err
		}
		tenants[i].Key = full
		companies[i], keyIDs[i], hashes[i], hints[i] = tenants[i].CompanyID, p.KeyID, apikey.HashSecret(p.Secret), apikey.Hint(p.Secret)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO api_keys (company_id, key_id, secret_hash, secret_hint)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::bytea[], $4::text[])`, companies, keyIDs, hashes, hints); err != nil {
		return nil, fmt.Errorf("provision keys: %w", err)
	}
	return tenants, nil
}

// CampaignRequests builds one campaign-send request per tenant, each with
// contacts distinct numbers.
func CampaignRequests(tenants []Tenant, contacts int) []Request {
	out := make([]Request, len(tenants))
	for i, t := range tenants {
		var b strings.Builder
		fmt.Fprintf(&b, `{"campaign_id":%d,"contacts":[`, t.CampaignID)
		for j := range contacts {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"+39%010d"`, i*10000+j)
		}
		b.WriteString(`],"is_forced":false}`)
		out[i] = Request{Key: t.Key, Body: []byte(b.String()), Contacts: contacts}
	}
	return out
}
