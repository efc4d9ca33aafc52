package cli

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSystemdUnitsCommandLines: the worker accepts every flag the shipped
// systemd units give it (an instance's %i and ${ADMIN_LISTEN} filled in).
func TestSystemdUnitsCommandLines(t *testing.T) {
	execStart := regexp.MustCompile(`(?m)^ExecStart=/usr/local/bin/mailspool (.*)$`)
	for _, unit := range []string{"mailspool-worker.service", "mailspool-worker@.service"} {
		b, err := os.ReadFile("../deploy/" + unit)
		require.NoError(t, err)
		m := execStart.FindStringSubmatch(string(b))
		require.NotNil(t, m, unit)
		line := strings.NewReplacer("%i", "tx", "${ADMIN_LISTEN}", "off").Replace(m[1])
		code, _, stderr := mailspool(t, append(strings.Fields(line), "-h")...)
		require.Equal(t, 0, code, "%s: %s", unit, stderr)
	}
}
