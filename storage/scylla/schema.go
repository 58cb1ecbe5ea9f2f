package scylla

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"
)

//go:embed schema.cql
var schemaCQL string

// ddlTimeout bounds each DDL statement: creating a table makes every node
// agree on the new schema, which takes far longer than a query.
const ddlTimeout = 60 * time.Second

// ApplySchema creates cfg.Keyspace with the given replication map (for
// example "{'class': 'NetworkTopologyStrategy', 'dc1': 3}", or
// "{'class': 'SimpleStrategy', 'replication_factor': 1}" for a test node)
// and the tables of schema.cql, waiting for schema agreement after each
// statement. Every statement is IF NOT EXISTS, or a column addition whose
// "already exists" counts as done, so applying twice is a no-op; an
// existing keyspace keeps its replication.
//
// This is the only code of the package that runs DDL: it is an operator
// step (or a test's), never part of serving.
func ApplySchema(ctx context.Context, cfg Config, replication string) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("scylla: apply schema: %w", err)
	}
	if err := validReplication(replication); err != nil {
		return fmt.Errorf("scylla: apply schema: %w", err)
	}
	admin := cfg
	admin.Timeout = max(cfg.Timeout, ddlTimeout)
	session, err := connect(ctx, admin, "") // the keyspace may not exist yet
	if err != nil {
		return fmt.Errorf("scylla: apply schema: %w", err)
	}
	defer session.Close()
	for _, stmt := range schemaStatements(cfg.Keyspace, replication) {
		if err := session.Query(stmt).WithContext(ctx).Exec(); err != nil && !columnExists(stmt, err) {
			return wrap("apply schema: "+firstLine(stmt), err)
		}
		if err := session.AwaitSchemaAgreement(ctx); err != nil {
			return wrap("apply schema: await agreement", err)
		}
	}
	return nil
}

// DropKeyspace removes cfg.Keyspace and everything in it. For tests and
// for tearing down a deployment; like ApplySchema, never part of serving.
func DropKeyspace(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("scylla: drop keyspace: %w", err)
	}
	admin := cfg
	admin.Timeout = max(cfg.Timeout, ddlTimeout)
	session, err := connect(ctx, admin, "")
	if err != nil {
		return fmt.Errorf("scylla: drop keyspace: %w", err)
	}
	defer session.Close()
	if err := session.Query("DROP KEYSPACE IF EXISTS " + cfg.Keyspace).WithContext(ctx).Exec(); err != nil {
		return wrap("drop keyspace "+cfg.Keyspace, err)
	}
	return nil
}

// schemaStatements returns the statements of schema.cql with the
// placeholders filled in, comments and blank lines dropped.
func schemaStatements(keyspace, replication string) []string {
	var b strings.Builder
	for line := range strings.Lines(schemaCQL) {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		b.WriteString(line)
	}
	r := strings.NewReplacer("{ks}", keyspace, "{replication}", replication)
	var out []string
	for stmt := range strings.SplitSeq(b.String(), ";") {
		if stmt = strings.TrimSpace(stmt); stmt != "" {
			out = append(out, r.Replace(stmt))
		}
	}
	return out
}

// validReplication accepts a CQL map literal and nothing that could end the
// statement: the string is spliced into DDL.
func validReplication(r string) error {
	r = strings.TrimSpace(r)
	if !strings.HasPrefix(r, "{") || !strings.HasSuffix(r, "}") || strings.ContainsAny(r, ";\n") || strings.Contains(r, "--") {
		return invalidConfig("replication %q is not a single-line CQL map literal like {'class': 'SimpleStrategy', 'replication_factor': 1}", r)
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

// columnExists reports an ALTER TABLE ... ADD of a column the table has
// already (made by the CREATE TABLE of a later schema, or added by an
// earlier apply): the schema's column additions are then done. Cassandra
// and ScyllaDB both answer an invalid request naming the column as
// existing ("conflicts with an existing column", "already exists").
func columnExists(stmt string, err error) bool {
	if !strings.HasPrefix(stmt, "ALTER TABLE") || !strings.Contains(stmt, " ADD ") {
		return false
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "existing column") || strings.Contains(msg, "already exist")
}
