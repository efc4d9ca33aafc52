package fake

import (
	"bufio"
	"bytes"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
)

// The fixture kinds; see the package documentation for the file format.
const (
	kindSMTPReply = "smtp-reply"
	kindHTTP      = "http"
	kindHang      = "hang"
	kindRefused   = "refused"
	kindTLS       = "tls"
	kindStall     = "stall"
	kindPanic     = "panic"
)

// panicStep is the "panic" step: not a recorded response but a crash of the
// sending process, for crash tests (see the package documentation).
var panicStep = &fixture{name: "panic", kind: kindPanic}

// fixture is one recorded response, parsed from testdata/<name>.resp.
type fixture struct {
	name string
	kind string
	// reply is the SMTP reply as sent, lines joined with CRLF (smtp-reply).
	reply string
	// status, header and body are the HTTP response (http).
	status int
	header http.Header
	body   []byte
}

//go:embed testdata/*.resp
var fixtureFiles embed.FS

// fixtures are the embedded fixtures by name; loaded once at init, as a
// malformed embedded file is a bug in this package (see fixture_test.go).
var fixtures = mustLoadFixtures(fixtureFiles)

// aliases are step names that name a fixture under another name.
var aliases = map[string]string{"hang": "timeout"}

func mustLoadFixtures(fsys fs.FS) map[string]*fixture {
	m, err := loadFixtures(fsys)
	if err != nil {
		panic(err)
	}
	return m
}

func loadFixtures(fsys fs.FS) (map[string]*fixture, error) {
	names, err := fs.Glob(fsys, "testdata/*.resp")
	if err != nil {
		return nil, err
	}
	m := make(map[string]*fixture, len(names))
	for _, file := range names {
		data, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(path.Base(file), ".resp")
		f, err := parseFixture(name, data)
		if err != nil {
			return nil, fmt.Errorf("fake: fixture %s: %w", file, err)
		}
		m[name] = f
	}
	return m, nil
}

// parseFixture parses "key: value" lines up to a blank line, then the payload.
func parseFixture(name string, data []byte) (*fixture, error) {
	head, payload, ok := bytes.Cut(data, []byte("\n\n"))
	if !ok {
		return nil, fmt.Errorf("no blank line after the header lines")
	}
	f := &fixture{name: name}
	for line := range strings.SplitSeq(string(head), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("header line %q is not \"key: value\"", line)
		}
		switch value = strings.TrimSpace(value); key {
		case "kind":
			f.kind = value
		case "note":
		default:
			return nil, fmt.Errorf("unknown header %q (known: kind, note)", key)
		}
	}
	switch f.kind {
	case kindSMTPReply:
		lines := strings.Split(strings.TrimRight(string(payload), "\n"), "\n")
		if len(lines) == 0 || lines[0] == "" {
			return nil, fmt.Errorf("empty smtp reply")
		}
		f.reply = strings.Join(lines, "\r\n")
	case kindHTTP:
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(payload)), nil)
		if err != nil {
			return nil, fmt.Errorf("http response: %w", err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("http body: %w", err)
		}
		f.status, f.header, f.body = resp.StatusCode, resp.Header, bytes.TrimRight(body, "\n")
	case kindHang, kindRefused, kindTLS, kindStall:
	default:
		return nil, fmt.Errorf("kind %q is not one of %s, %s, %s, %s, %s, %s",
			f.kind, kindSMTPReply, kindHTTP, kindHang, kindRefused, kindTLS, kindStall)
	}
	return f, nil
}

// lookupStep returns the fixture a script step names.
func lookupStep(step string) (*fixture, error) {
	if step == panicStep.name {
		return panicStep, nil
	}
	if a, ok := aliases[step]; ok {
		step = a
	}
	if f, ok := fixtures[step]; ok {
		return f, nil
	}
	return nil, fmt.Errorf("fake: unknown step %q (known: %s, and %s for crash tests)", step, strings.Join(stepNames(), ", "), panicStep.name)
}

// stepNames returns every step a script may name, sorted: the embedded
// fixtures (ok, 421, 450, ..., http-429, timeout, refused, tls, stall,
// ses-throttling, ...) and the aliases (hang).
func stepNames() []string {
	names := make([]string, 0, len(fixtures)+len(aliases))
	for n := range fixtures {
		names = append(names, n)
	}
	for a := range aliases {
		names = append(names, a)
	}
	slices.Sort(names)
	return names
}
