package sources

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"

	"github.com/contextrouter/contextrouter/internal/redact"
)

// Secret keys read for spec.gitRepo.auth.
const (
	GitSecretUsername   = "username"
	GitSecretPassword   = "password"
	GitSecretToken      = "token"
	GitSecretSSHKey     = "ssh-privatekey"
	GitSecretKnownHosts = "known_hosts"

	// gitTokenUser is the user name sent with a token when the secret has no
	// username. GitHub, Gitea and GitLab accept any non-empty name with a token.
	gitTokenUser = "x-access-token"
	gitSSHUser   = "git"
)

// gitTransport is the kind of connection a URL needs.
type gitTransport int

const (
	gitHTTP gitTransport = iota
	gitSSH
	gitFile
)

// gitEndpoint is a validated spec.gitRepo.url.
type gitEndpoint struct {
	// url is what go-git dials: the URL as written, or an absolute path for a local repository.
	url       string
	transport gitTransport
	// display is the URL for errors and logs: redact.URL, no user part.
	display string
	// key identifies the repository for the cache folder name; it has no
	// credentials, so rotating a token in the URL keeps the clone.
	key string
	// host is host:port for SSH known_hosts lookups.
	host string
}

var (
	urlSchemeRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)
	// scpLikeRe follows git: [user@]host:path where the colon comes before any slash.
	scpLikeRe = regexp.MustCompile(`^(?:([^@/\s]+)@)?([^@/:\s]+):(.+)$`)
)

const gitURLHelp = "want https://, http://, ssh://, user@host:path, file:// or a local path"

// parseGitURL validates a repository URL. Relative local paths are resolved
// against baseDir (the manifest's folder) like Directory paths; nothing is read.
func parseGitURL(raw, baseDir string) (gitEndpoint, error) {
	switch {
	case raw == "":
		return gitEndpoint{}, errors.New("must be set")
	case strings.TrimSpace(raw) != raw || strings.ContainsAny(raw, "\n\r\t"):
		return gitEndpoint{}, errors.New("must not contain surrounding or control whitespace")
	}

	if urlSchemeRe.MatchString(raw) {
		u, err := url.Parse(raw)
		if err != nil {
			return gitEndpoint{}, errors.New("invalid URL: " + redact.ParseError(err))
		}
		ep := gitEndpoint{url: raw, display: redact.URL(raw)}
		keyURL := *u
		keyURL.User = nil
		keyURL.Scheme = strings.ToLower(u.Scheme)
		keyURL.Host = strings.ToLower(u.Host)
		ep.key = keyURL.String()
		switch keyURL.Scheme {
		case "https", "http":
			ep.transport = gitHTTP
			if u.Host == "" {
				return gitEndpoint{}, fmt.Errorf("%q has no host", ep.display)
			}
		case "ssh":
			ep.transport = gitSSH
			if u.Hostname() == "" {
				return gitEndpoint{}, fmt.Errorf("%q has no host", ep.display)
			}
			port := u.Port()
			if port == "" {
				port = "22"
			}
			ep.host = net.JoinHostPort(u.Hostname(), port)
		case "file":
			ep.transport = gitFile
			if u.Host != "" && u.Host != "localhost" {
				return gitEndpoint{}, fmt.Errorf("%q: a file URL cannot name a host", ep.display)
			}
			if u.Path == "" {
				return gitEndpoint{}, fmt.Errorf("%q has no path", ep.display)
			}
			ep.key = "file://" + filepath.ToSlash(filepath.Clean(filepath.FromSlash(u.Path)))
		default:
			return gitEndpoint{}, fmt.Errorf("unsupported scheme %q (%s)", u.Scheme, gitURLHelp)
		}
		return ep, nil
	}

	if m := scpLikeRe.FindStringSubmatch(raw); m != nil && !isDriveLetterPath(raw) {
		// user@host:path is SSH; it cannot carry a password.
		return gitEndpoint{
			url:       raw,
			transport: gitSSH,
			display:   redact.URL(raw),
			key:       "ssh://" + strings.ToLower(m[2]) + "/" + strings.TrimPrefix(m[3], "/"),
			host:      net.JoinHostPort(m[2], "22"),
		}, nil
	}

	p := filepath.FromSlash(raw)
	if !filepath.IsAbs(p) {
		if baseDir != "" {
			p = filepath.Join(baseDir, p)
		} else if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
	}
	p = filepath.Clean(p)
	return gitEndpoint{url: p, transport: gitFile, display: p, key: "file://" + filepath.ToSlash(p)}, nil
}

// isDriveLetterPath reports a Windows path such as C:\docs or C:/docs, which
// would otherwise look like host "C" with an SCP-style path.
func isDriveLetterPath(s string) bool {
	return len(s) >= 3 && s[1] == ':' && (s[2] == '\\' || s[2] == '/') &&
		((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))
}

// gitCredentials is the auth for one sync plus what scrubs its credentials
// from errors and logs.
type gitCredentials struct {
	method transport.AuthMethod
	// scrub masks, in every encoding a server may echo them in, the
	// credentials of the URL and of method as go-git sends them; nil when
	// the sync got no further than its start (GitRepo.scrub).
	scrub *redact.Scrubber
}

// resolveGitAuth reads spec.gitRepo.auth.secretRef at sync time, so a rotated
// secret is picked up by the next sync. Local repositories take no credentials.
func resolveGitAuth(secretName string, secrets SecretResolver, ep gitEndpoint) (creds gitCredentials, err error) {
	var sent redact.Credentials
	sent.AddURL(ep.url)
	defer func() { creds.scrub = sent.Scrubber() }()
	if secretName == "" || ep.transport == gitFile {
		return creds, nil
	}
	field := "spec.gitRepo.auth.secretRef"
	// get returns ("", nil) for a key that is absent, and an error for any other failure.
	get := func(key string) (string, error) {
		v, err := secrets.SecretValue(secretName, key)
		if errors.Is(err, ErrSecretNotFound) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
		return v, nil
	}

	switch ep.transport {
	case gitSSH:
		key, err := get(GitSecretSSHKey)
		if err != nil {
			return creds, err
		}
		if key == "" {
			return creds, fmt.Errorf("%s: secret %q has no key %q (an ssh URL needs a private key)", field, secretName, GitSecretSSHKey)
		}
		sent.AddSecret(key)
		user, err := get(GitSecretUsername)
		if err != nil {
			return creds, err
		}
		if user == "" {
			user = sshUserFromURL(ep.url)
		}
		pk, err := gitssh.NewPublicKeys(user, []byte(key), "")
		if err != nil {
			// The parse error never quotes the key.
			return creds, fmt.Errorf("%s: secret %q key %q: %w", field, secretName, GitSecretSSHKey, err)
		}
		knownHosts, err := get(GitSecretKnownHosts)
		if err != nil {
			return creds, err
		}
		if err := setKnownHosts(pk, knownHosts, ep.host); err != nil {
			if knownHosts == "" {
				return creds, fmt.Errorf("%s: secret %q has no key %q and the user's known_hosts cannot be used: %w",
					field, secretName, GitSecretKnownHosts, err)
			}
			return creds, fmt.Errorf("%s: secret %q key %q: %w", field, secretName, GitSecretKnownHosts, err)
		}
		creds.method = pk
		return creds, nil

	default:
		user, err := get(GitSecretUsername)
		if err != nil {
			return creds, err
		}
		token, err := get(GitSecretToken)
		if err != nil {
			return creds, err
		}
		password := token
		if token != "" {
			if user == "" {
				user = gitTokenUser
			}
		} else {
			if password, err = get(GitSecretPassword); err != nil {
				return creds, err
			}
			if user == "" || password == "" {
				return creds, fmt.Errorf("%s: secret %q has neither key %q nor both %q and %q",
					field, secretName, GitSecretToken, GitSecretUsername, GitSecretPassword)
			}
		}
		// go-git sends it as net/http's SetBasicAuth does; a server that
		// refuses it may echo the header, encoded or decoded.
		sent.AddBasic(user, password)
		creds.method = &githttp.BasicAuth{Username: user, Password: password}
		return creds, nil
	}
}

// sshUserFromURL returns the user named in an ssh:// or user@host:path URL, else "git".
func sshUserFromURL(raw string) string {
	if urlSchemeRe.MatchString(raw) {
		if u, err := url.Parse(raw); err == nil && u.User != nil && u.User.Username() != "" {
			return u.User.Username()
		}
		return gitSSHUser
	}
	if m := scpLikeRe.FindStringSubmatch(raw); m != nil && m[1] != "" {
		return m[1]
	}
	return gitSSHUser
}

// setKnownHosts makes host key checking strict: the secret's known_hosts when
// given, else the user's (SSH_KNOWN_HOSTS, ~/.ssh/known_hosts,
// /etc/ssh/ssh_known_hosts). An unknown host is refused either way.
func setKnownHosts(pk *gitssh.PublicKeys, knownHosts, hostPort string) error {
	var files []string
	if knownHosts != "" {
		// The known_hosts parser only reads files; the file is read at once and removed.
		f, err := os.CreateTemp("", "contextrouter-known_hosts-*")
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		_, werr := f.WriteString(knownHosts)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return werr
		}
		files = []string{f.Name()}
	}
	db, err := gitssh.NewKnownHostsDb(files...)
	if err != nil {
		return err
	}
	pk.HostKeyCallback = db.HostKeyCallback()
	// Offer only the host key types known_hosts holds, so the server does not
	// pick a type we could not verify.
	pk.HostKeyAlgorithms = db.HostKeyAlgorithms(hostPort)
	return nil
}
