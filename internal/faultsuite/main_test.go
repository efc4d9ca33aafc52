package faultsuite

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// enabled says whether the suite runs: MAILSPOOL_FAULTS=1. The plain
// "go test ./..." of the README leaves it out (it takes minutes and starts
// processes); CI runs it as a step of its own.
var enabled = os.Getenv("MAILSPOOL_FAULTS") == "1"

// binary is the mailspool command the scenarios run, built once.
var binary string

func TestMain(m *testing.M) {
	if !enabled {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "mailspool-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultsuite:", err)
		os.Exit(2)
	}
	binary = filepath.Join(dir, "mailspool")
	build := exec.Command("go", "build", "-o", binary, "github.com/mailspool/mailspool/cmd/mailspool")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "faultsuite: building mailspool:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// scenario marks a test as part of the fault suite: it skips unless
// MAILSPOOL_FAULTS=1.
func scenario(t *testing.T) {
	t.Helper()
	if !enabled {
		t.Skip("fault suite: set MAILSPOOL_FAULTS=1 to run it (see docs/RELIABILITY.md)")
	}
}
