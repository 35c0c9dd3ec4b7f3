package sources

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SecretResolver returns the value of one key of a named Secret.
type SecretResolver interface {
	SecretValue(name, key string) (string, error)
}

// ErrSecretNotFound is returned (wrapped) when a secret key cannot be resolved.
var ErrSecretNotFound = errors.New("secret not found")

// EnvFileSecrets resolves secrets for the standalone CLI and for pods: first the
// environment variable CONTEXTROUTER_SECRET_<NAME>_<KEY>, then the file
// <Dir>/<name>/<key> (the layout of a Secret volume mounted at Dir/<name>).
type EnvFileSecrets struct {
	// Dir holds one folder per Secret; empty disables files.
	Dir string
	// Getenv is os.Getenv when nil.
	Getenv func(string) string
}

// SecretEnvVar is the environment variable that holds a secret key.
func SecretEnvVar(name, key string) string {
	up := func(s string) string {
		var b strings.Builder
		for _, r := range strings.ToUpper(s) {
			if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
				b.WriteRune(r)
			} else {
				b.WriteByte('_')
			}
		}
		return b.String()
	}
	return "CONTEXTROUTER_SECRET_" + up(name) + "_" + up(key)
}

// SecretValue implements SecretResolver.
func (s EnvFileSecrets) SecretValue(name, key string) (string, error) {
	getenv := s.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	env := SecretEnvVar(name, key)
	if v := getenv(env); v != "" {
		return v, nil
	}
	if s.Dir != "" && !strings.ContainsAny(name+key, `/\`) && name != ".." && key != ".." {
		b, err := os.ReadFile(filepath.Join(s.Dir, name, key))
		if err == nil {
			return strings.TrimRight(string(b), "\r\n"), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("secret %s key %s: %w", name, key, err)
		}
		return "", fmt.Errorf("secret %s key %s: %w (set %s or create %s)", name, key, ErrSecretNotFound, env, filepath.Join(s.Dir, name, key))
	}
	return "", fmt.Errorf("secret %s key %s: %w (set %s)", name, key, ErrSecretNotFound, env)
}
