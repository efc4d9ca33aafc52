package cli

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJSONContract runs every command's --json output through the schema
// docs/JSON.md documents: each field the output holds is documented for
// that command, with its type; each field documented as always there is
// there; no absent value is written as a zero (a 0 duration, a zero time);
// nothing is HTML-escaped.
func TestJSONContract(t *testing.T) {
	schemas := readJSONDoc(t, "../docs/JSON.md")
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "q.db")
	cfg := writeFile(t, "mailspool.toml", `
[lanes.tx]
transport = "fake://?recipient=true"
recipient_limit = "off"
poll_interval = "10ms"
`)
	mails := writeFile(t, "mails.json", `[{"from": "Shop <shop@shop.example>", "to": "dora@example.com", "subject": "a & b <c>", "text": "hi", "idempotency_key": "k1"},
 {"from": "shop@shop.example", "to": "eve@example.com", "subject": "s", "text": "hi", "idempotency_key": "k1"}]`)
	ms := func(args ...string) (int, string, string) {
		t.Helper()
		return mailspool(t, append(args, "--db", db, "--config", cfg)...)
	}
	code, _, stderr := ms("migrate")
	require.Equal(t, 0, code, stderr)

	seen := map[string]bool{}
	// check runs a command line with --json, and (unless noDB) the test's
	// database and config.
	check := func(name string, wantCode int, args ...string) string {
		t.Helper()
		switch args[0] {
		case "classify", "version":
		case "send-test":
			args = append(args, "--config", cfg)
		default:
			args = append(args, "--db", db, "--config", cfg)
		}
		code, out, stderr := mailspool(t, append(args, "--json")...)
		require.Equal(t, wantCode, code, "%s: %s", name, stderr)
		seen[name] = true
		if os.Getenv("DUMP_JSON_PATHS") != "" {
			var v any
			_ = json.Unmarshal([]byte(out), &v)
			got := map[string]string{}
			flatten("", v, got)
			for _, k := range slices.Sorted(maps.Keys(got)) {
				fmt.Printf("%s\t%s\t%s\n", name, k, got[k])
			}
			return out
		}
		schema, ok := schemas[name]
		require.True(t, ok, "docs/JSON.md has no section for %s", name)
		assert.NotContains(t, out, `\u003c`, "%s: HTML-escaped", name)
		assert.NotContains(t, out, `\u0026`, "%s: HTML-escaped", name)
		var v any
		require.NoError(t, json.Unmarshal([]byte(out), &v), "%s: %s", name, out)
		got := map[string]string{}
		flatten("", v, got)
		for path, typ := range got {
			want, ok := schema.types[path]
			if !assert.True(t, ok, "%s: field %s (%s) is not in docs/JSON.md\n%s", name, path, typ, out) {
				continue
			}
			assert.Equal(t, want, typ, "%s: field %s", name, path)
		}
		for _, path := range schema.always {
			if parent := path[:max(0, strings.LastIndex(path, "."))]; parent != "" && !hasPrefixIn(got, parent+".") {
				continue // a field of an object (or array element) the output does not have
			}
			_, ok := got[path]
			assert.True(t, ok, "%s: field %s is always there, says docs/JSON.md\n%s", name, path, out)
		}
		assert.NotRegexp(t, `_seconds": 0[,\n]`, out, "%s: a zero duration is left out", name)
		assert.NotContains(t, out, `"0001-01-01`, "%s: a zero time is left out", name)
		return out
	}

	out := check("enqueue", 0, "enqueue", "--from", "shop@shop.example", "--to", "ann@example.com", "--subject", "s", "--text", "hi", "--idempotency-key", "k0")
	assert.NotContains(t, out, `"duplicate"`)
	out = check("enqueue", 0, "enqueue", "--from", "shop@shop.example", "--to", "ann@example.com", "--subject", "s", "--text", "hi", "--idempotency-key", "k0")
	assert.Contains(t, out, `"duplicate": true`, "a duplicate enqueue says so")
	check("enqueue", 0, "enqueue", "--file", mails)
	code, _, stderr = ms("enqueue", "--from", "shop@shop.example", "--to", "bob+550@example.com", "--subject", "s", "--text", "hi")
	require.Equal(t, 0, code, stderr)
	code, _, stderr = ms("worker", "--max-messages", "3", "--log-level", "warn")
	require.Equal(t, 0, code, stderr)
	code, _, stderr = ms("enqueue", "--from", "shop@shop.example", "--to", "fay@example.com", "--subject", "s", "--text", "hi")
	require.Equal(t, 0, code, stderr)
	check("list", 0, "list")
	check("show", 0, "show", "--full", "2") // its subject holds <, > and &
	check("show", 0, "show", "3")
	check("retry", 0, "retry", "--dry-run", "3")
	check("cancel", 0, "cancel", "--dry-run", "--yes", "4")
	check("cleanup", 0, "cleanup", "--dry-run", "--older-than", "7d", "--status", "sent")
	check("pause", 0, "pause", "--lane", "tx", "--reason", "incident")
	check("stats", 0, "stats")
	check("check", 1, "check")
	check("pause", 0, "resume", "--lane", "tx")
	check("classify", 0, "classify", "550 5.1.1 <ann@example.com>: user unknown")
	check("classify", 0, "classify", "421 4.7.0 try again in 300 seconds")
	check("send-test", 0, "send-test", "--lane", "tx", "--from", "shop@shop.example", "--to", "ann@example.com")
	check("migrate status", 0, "migrate", "status")
	check("version", 0, "version")
	check("suppress list", 0, "suppress", "list")
	check("error", 3, "show", "99")
	check("error", 1, "enqueue", "--from", "shop@shop.example", "--to", "x@example.com", "--subject", "s", "--text", "hi", "--lane", "none")

	for name := range schemas {
		assert.True(t, seen[name], "docs/JSON.md documents %s, which this test never runs", name)
	}
}

func hasPrefixIn(m map[string]string, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// flatten records each field of v under its path (a.b, a[].c) with its
// JSON type: string, number, bool, object, array or time (an RFC 3339
// string in a field named *_at, time, since or until).
func flatten(path string, v any, out map[string]string) {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch x := v.(type) {
	case map[string]any:
		if path != "" && !strings.HasSuffix(path, "[]") {
			out[path] = "object"
		}
		for k, e := range x {
			if k == "tx" { // the test's lane, as a key of a map by lane
				k = "LANE"
			}
			flatten(join(k), e, out)
		}
	case []any:
		if path != "" {
			out[path] = "array"
		}
		for _, e := range x {
			flatten(path+"[]", e, out)
		}
	case string:
		out[path] = "string"
		if isTimeField(path) {
			out[path] = "time"
		}
	case float64:
		out[path] = "number"
	case bool:
		out[path] = "bool"
	case nil:
		out[path] = "null"
	}
}

var timeField = regexp.MustCompile(`(_at|^time|\.time|since|until|after)$`)

func isTimeField(path string) bool { return timeField.MatchString(path) }

type jsonSchema struct {
	types  map[string]string
	always []string
}

// readJSONDoc reads docs/JSON.md: a "### NAME" heading per command, then a
// table whose rows are | `path` | type | when |; "always" in the last
// column marks a field that is always there.
func readJSONDoc(t *testing.T, path string) map[string]jsonSchema {
	t.Helper()
	doc, err := os.ReadFile(path)
	require.NoError(t, err)
	row := regexp.MustCompile("^\\| `([^`]+)` +\\| (\\w+) +\\| (.*)\\|$")
	out := map[string]jsonSchema{}
	name := ""
	for line := range strings.SplitSeq(string(doc), "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			name = strings.Trim(h, "`")
			out[name] = jsonSchema{types: map[string]string{}}
			continue
		}
		m := row.FindStringSubmatch(line)
		if m == nil || name == "" {
			continue
		}
		s := out[name]
		require.True(t, slices.Contains([]string{"string", "number", "bool", "object", "array", "time"}, m[2]), "docs/JSON.md %s: type %q", name, m[2])
		s.types[m[1]] = m[2]
		if strings.HasPrefix(strings.TrimSpace(m[3]), "always") {
			s.always = append(s.always, m[1])
		}
		out[name] = s
	}
	require.NotEmpty(t, out, "docs/JSON.md has no command sections")
	return out
}
