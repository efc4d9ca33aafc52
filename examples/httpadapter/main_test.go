package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestMain makes this test binary the custom mailspool binary when
// MAILSPOOL_EXAMPLE_MAIN=1: main() with the arguments given.
func TestMain(m *testing.M) {
	if os.Getenv("MAILSPOOL_EXAMPLE_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// postmarkAPI is a minimal Postmark POST /email on loopback.
type postmarkAPI struct {
	mu  sync.Mutex
	to  []string
	srv *httptest.Server
}

func newPostmarkAPI(t *testing.T, token string) *postmarkAPI {
	api := &postmarkAPI{}
	api.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/email" || r.Header.Get("X-Postmark-Server-Token") != token {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]any{"ErrorCode": 10, "Message": "bad token"})
			return
		}
		var req struct{ To string }
		json.NewDecoder(r.Body).Decode(&req)
		to, err := mail.ParseAddress(req.To)
		if err != nil {
			w.WriteHeader(http.StatusUnprocessableEntity)
			json.NewEncoder(w).Encode(map[string]any{"ErrorCode": 300, "Message": "Invalid 'To' address"})
			return
		}
		api.mu.Lock()
		api.to = append(api.to, to.Address)
		api.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"To": req.To, "MessageID": "pm-1", "ErrorCode": 0, "Message": "OK"})
	}))
	t.Cleanup(api.srv.Close)
	return api
}

func (a *postmarkAPI) recipients() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.to...)
}

// mailspool runs this binary as the custom mailspool command.
func mailspool(t *testing.T, dir string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "MAILSPOOL_EXAMPLE_MAIN=1"), env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// The custom binary knows postmark:// in send-test and in a lane's
// worker, and keeps every command of mailspool.
func TestCustomBinary(t *testing.T) {
	const token = "pm-token-for-the-test"
	api := newPostmarkAPI(t, token)
	dir := t.TempDir()
	env := []string{"PM_TOKEN=" + token, "MAILSPOOL_DATABASE=sqlite:" + filepath.Join(dir, "q.db")}
	trURL := "postmark://?token_env=PM_TOKEN&endpoint=" + api.srv.URL

	code, out, errOut := mailspool(t, dir, env, "send-test", "--transport", trURL, "--from", "noreply@shop.example", "--to", "ann@example.com", "--json")
	if code != 0 || !strings.Contains(out, `"message_id": "pm-1"`) {
		t.Fatalf("send-test: exit %d\n%s%s", code, out, errOut)
	}

	cfg := "[lanes.tx]\ntransport = \"" + trURL + "\"\nrecipient_limit = \"off\"\n"
	if err := os.WriteFile(filepath.Join(dir, "mailspool.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"migrate"},
		{"enqueue", "--from", "noreply@shop.example", "--to", "bob@example.com", "--subject", "Welcome", "--text", "hi"},
		{"worker", "--max-messages", "1", "--log-level", "warn"},
	} {
		if code, out, errOut := mailspool(t, dir, env, args...); code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", args[0], code, out, errOut)
		}
	}
	got := api.recipients()
	if len(got) != 2 || got[0] != "ann@example.com" || got[1] != "bob@example.com" {
		t.Fatalf("Postmark received mail for %q, want ann@example.com then bob@example.com", got)
	}
	code, out, _ = mailspool(t, dir, env, "show", "1")
	if code != 0 || !strings.Contains(out, "provider id  pm-1") {
		t.Fatalf("show: exit %d\n%s", code, out)
	}
	// The stock mailspool has no postmark://; this one says which it has.
	code, _, errOut = mailspool(t, dir, env, "send-test", "--transport", "nosuch://x", "--from", "a@shop.example", "--to", "b@example.com")
	if code == 0 || !strings.Contains(errOut, "postmark") {
		t.Fatalf("an unknown scheme: exit %d, stderr %s; want an error listing postmark among the schemes", code, errOut)
	}
}
