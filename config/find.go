package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ConfigEnv names the config file when no path is given.
const ConfigEnv = "MAILSPOOL_CONFIG"

// SystemPath is the config file of a system-wide installation, the last
// place Find looks.
const SystemPath = "/etc/mailspool/mailspool.toml"

// Find returns the config file to use when none is given: the file
// MAILSPOOL_CONFIG names (it must exist), else mailspool.toml in the
// working directory, else SystemPath; "" when there is none (Load then
// makes one lane "default"). from says where the file was found.
func Find() (path, from string, err error) {
	if p := os.Getenv(ConfigEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("config: %s=%s: %w", ConfigEnv, p, err)
		}
		return p, "$" + ConfigEnv, nil
	}
	for _, c := range []struct{ path, from string }{
		{"mailspool.toml", "the working directory"},
		{SystemPath, "the system-wide location"},
	} {
		_, err := os.Stat(c.path)
		if err == nil {
			return c.path, c.from, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", "", fmt.Errorf("config: %s: %w", c.path, err)
		}
	}
	return "", "", nil
}
