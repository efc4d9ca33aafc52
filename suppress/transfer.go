package suppress

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Format is a file format of Export and Parse.
type Format string

// The formats.
const (
	CSV  Format = "csv"
	JSON Format = "json"
)

// ParseFormat returns the format named s.
func ParseFormat(s string) (Format, error) {
	switch Format(strings.ToLower(s)) {
	case CSV:
		return CSV, nil
	case JSON:
		return JSON, nil
	}
	return "", fmt.Errorf("suppress: unknown format %q (want csv or json)", s)
}

var csvHeader = []string{"address", "scope", "reason", "source", "created_at", "expires_at"}

// Export writes es to w: CSV with a header line (times RFC 3339, an empty
// expires_at for until removed), or a JSON array. Parse reads both back.
func Export(w io.Writer, f Format, es []Entry) error {
	if f == JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(es)
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for _, e := range es {
		exp := ""
		if !e.ExpiresAt.IsZero() {
			exp = e.ExpiresAt.UTC().Format(time.RFC3339)
		}
		if err := cw.Write([]string{e.Address, e.Scope, string(e.Reason), e.Source, e.CreatedAt.UTC().Format(time.RFC3339), exp}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ParseOptions say how Parse fills what a file does not say.
type ParseOptions struct {
	// Reason is the reason of a record without a reason mailspool knows
	// (default Manual).
	Reason Reason
	// Scope is the scope of a record without one (default ScopeAll).
	Scope string
	// Source is the source of a record without one.
	Source string
}

// MaxImport bounds the records one Parse reads.
const MaxImport = 1_000_000

// Parse reads entries from r: Export's CSV or JSON, or a provider's
// export of its suppression list: a CSV whose header names an email or
// address column (SendGrid's bounce, spam report, unsubscribe and invalid
// email exports), a JSON array of such objects, or Amazon SES's
// ListSuppressedDestinations output ({"SuppressedDestinationSummaries":
// [{"EmailAddress", "Reason", "LastUpdateTime"}]}). Columns and keys are
// matched without case: address or email or emailaddress; reason; scope;
// source; created_at or created or lastupdatetime (RFC 3339 or unix
// seconds); expires_at. A reason mailspool does not know (a provider's
// bounce text) becomes o.Reason. Every record is checked; the error names
// the first bad one (line of the CSV, position in the JSON).
func Parse(r io.Reader, f Format, o ParseOptions) ([]Entry, error) {
	if o.Reason == "" {
		o.Reason = Manual
	}
	if o.Scope == "" {
		o.Scope = ScopeAll
	}
	var recs []map[string]string
	var where func(i int) string
	var err error
	if f == JSON {
		recs, err = jsonRecords(r)
		where = func(i int) string { return "record " + strconv.Itoa(i+1) }
	} else {
		recs, err = csvRecords(r)
		where = func(i int) string { return "line " + strconv.Itoa(i+2) }
	}
	if err != nil {
		return nil, err
	}
	es := make([]Entry, 0, len(recs))
	for i, rec := range recs {
		e, err := entryOf(rec, o)
		if err == nil {
			err = e.check()
		}
		if err != nil {
			return nil, fmt.Errorf("suppress: import: %s: %w", where(i), err)
		}
		es = append(es, e)
	}
	return es, nil
}

// field returns the first of keys that rec has.
func field(rec map[string]string, keys ...string) string {
	for _, k := range keys {
		if v, ok := rec[k]; ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func entryOf(rec map[string]string, o ParseOptions) (Entry, error) {
	e := Entry{Address: field(rec, "address", "email", "emailaddress"), Scope: field(rec, "scope"), Source: field(rec, "source")}
	if e.Address == "" {
		return e, errors.New("no address")
	}
	if e.Scope == "" {
		e.Scope = o.Scope
	}
	if e.Source == "" {
		e.Source = o.Source
	}
	e.Reason = reasonOf(field(rec, "reason"), o.Reason)
	var err error
	if e.CreatedAt, err = parseTime(field(rec, "created_at", "created", "lastupdatetime")); err != nil {
		return e, fmt.Errorf("created_at: %w", err)
	}
	if e.ExpiresAt, err = parseTime(field(rec, "expires_at")); err != nil {
		return e, fmt.Errorf("expires_at: %w", err)
	}
	return e, nil
}

// reasonOf maps a file's reason to ours.
func reasonOf(s string, def Reason) Reason {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "hard_bounce", "bounce", "bounces", "hard bounce":
		return HardBounce
	case "complaint", "spam report", "spam_report", "spamreport", "spam reports":
		return Complaint
	case "unsubscribe", "unsubscribes", "group_unsubscribe":
		return Unsubscribe
	case "manual":
		return Manual
	case "invalid", "invalid email", "invalid_email":
		return Invalid
	}
	return def
}

// parseTime reads RFC 3339, "2006-01-02 15:04:05" (UTC) or unix seconds;
// "" is the zero time.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n <= 0 {
			return time.Time{}, fmt.Errorf("%q is not a time", s)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time (RFC 3339 or unix seconds)", s)
}

func csvRecords(r io.Reader) ([]map[string]string, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("suppress: import: reading the CSV header: %w", err)
	}
	for i, h := range header {
		header[i] = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
	}
	var recs []map[string]string
	for {
		row, err := cr.Read()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("suppress: import: %w", err)
		}
		if len(recs) == MaxImport {
			return nil, fmt.Errorf("suppress: import: more than %d records", MaxImport)
		}
		rec := make(map[string]string, len(header))
		for i, v := range row {
			if i < len(header) {
				rec[header[i]] = v
			}
		}
		recs = append(recs, rec)
	}
}

func jsonRecords(r io.Reader) ([]map[string]string, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("suppress: import: %w", err)
	}
	data = bytes.TrimSpace(data)
	var raw []map[string]any
	if len(data) > 0 && data[0] == '{' {
		var ses struct {
			Summaries []map[string]any `json:"SuppressedDestinationSummaries"`
		}
		if err := json.Unmarshal(data, &ses); err != nil {
			return nil, fmt.Errorf("suppress: import: %w", err)
		}
		if ses.Summaries == nil {
			return nil, errors.New("suppress: import: a JSON object without SuppressedDestinationSummaries (want an array of entries, or SES's ListSuppressedDestinations output)")
		}
		raw = ses.Summaries
	} else if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("suppress: import: %w", err)
	}
	if len(raw) > MaxImport {
		return nil, fmt.Errorf("suppress: import: more than %d records", MaxImport)
	}
	recs := make([]map[string]string, len(raw))
	for i, obj := range raw {
		rec := make(map[string]string, len(obj))
		for k, v := range obj {
			switch v := v.(type) {
			case string:
				rec[strings.ToLower(k)] = v
			case float64:
				rec[strings.ToLower(k)] = strconv.FormatInt(int64(v), 10)
			case nil:
			default:
				return nil, fmt.Errorf("suppress: import: record %d: %s is not a string or a number", i+1, k)
			}
		}
		recs[i] = rec
	}
	return recs, nil
}
