package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExampleAdapterModule builds, vets and tests examples/httpadapter, a
// module of its own (a replace points it at this repository): a Postmark
// adapter passes the conformance suite from outside this module, and its
// ten-line main builds a mailspool binary that runs send-test and worker
// with it. It needs no network (GOPROXY=off): it runs on a copy of the
// example whose go.sum also holds this module's, with -mod=mod, so that a
// module this repository starts to use reaches the example from the
// module cache without anyone editing the example's go.mod first.
func TestExampleAdapterModule(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join(root, "examples/httpadapter"))))
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	mod = []byte(strings.Replace(string(mod), "=> ../..", "=> "+root, 1))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), mod, 0o644))
	sums, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	own, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), append(own, sums...), 0o644))
	for _, args := range [][]string{{"vet", "./..."}, {"test", "-count=1", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %v in a copy of examples/httpadapter:\n%s", args, out)
	}
}
