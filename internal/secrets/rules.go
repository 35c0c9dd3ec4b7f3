package secrets

// ruleID indexes ruleTable.
type ruleID uint8

const (
	rAWSAccessKey ruleID = iota
	rAWSSecretKey
	rGCPAPIKey
	rAzureStorageKey
	rAzureSharedAccessKey
	rGitHubToken
	rGitLabToken
	rSlackToken
	rSlackWebhook
	rStripeKey
	rTwilioAPIKey
	rSendGridKey
	rNPMToken
	rPyPIToken
	rOpenAIKey
	rAnthropicKey
	rHuggingFaceToken
	rGoogleOAuthSecret
	rTelegramBotToken
	rDiscordBotToken
	rPrivateKey
	rJWT
	rCardNumber
	rAuthorization
	rURLPassword
	rPassword
	rToken
	rAPIKey
	rSecret
	rHighEntropy
	numRules
)

// Precedence when two rules match overlapping text: the lower wins and
// names the merged mask, so "token=ghp_…" reads [secret:github-token].
const (
	prioProvider      = iota // a provider's own token format
	prioStructured           // JWT, card number
	prioAssignedKnown        // a provider key known by the name it is assigned to
	prioHeader               // Authorization header, URL password
	prioAssigned             // password=, token:, api_key…
	prioEntropy              // a random-looking value beside a key-like name
)

type ruleDef struct {
	id      string
	prio    uint8
	matches string
	source  string
}

// ruleTable describes every rule; the matchers are in scan.go and assign.go.
var ruleTable = [numRules]ruleDef{
	rAWSAccessKey: {"aws-access-key", prioProvider,
		"an access key id: AKIA, ASIA, ABIA or ACCA and 16 upper-case letters or digits",
		"AWS IAM User Guide, IAM identifiers: unique ID prefixes"},
	rAWSSecretKey: {"aws-secret-key", prioAssignedKnown,
		"40 base64 characters assigned to an AWS secret key name (aws_secret_access_key, AWS_SECRET_ACCESS_KEY, \"SecretAccessKey\")",
		"AWS IAM User Guide, managing access keys; AWS CLI configuration files"},
	rGCPAPIKey: {"gcp-api-key", prioProvider,
		"AIza and 35 characters of [A-Za-z0-9_-]",
		"Google Cloud documentation, API keys"},
	rAzureStorageKey: {"azure-storage-key", prioAssignedKnown,
		"the AccountKey= value of a storage connection string",
		"Azure Storage documentation, configure a connection string"},
	rAzureSharedAccessKey: {"azure-shared-access-key", prioAssignedKnown,
		"the SharedAccessKey= value of a Service Bus, Event Hubs or IoT Hub connection string",
		"Azure Service Bus documentation, shared access signature authentication"},
	rGitHubToken: {"github-token", prioProvider,
		"ghp_, gho_, ghu_, ghs_, ghr_ and at least 36 letters or digits; github_pat_ and at least 40 of [A-Za-z0-9_]",
		"GitHub Docs, about authentication to GitHub: GitHub's token formats"},
	rGitLabToken: {"gitlab-token", prioProvider,
		"glpat-, gldt-, glrt-, glcbt-, glptt-, glft-, glimt-, glagent-, gloas-, glsoat- and at least 20 of [A-Za-z0-9_-]",
		"GitLab documentation, token prefixes"},
	rSlackToken: {"slack-token", prioProvider,
		"xoxb-, xoxp-, xoxa-, xoxr-, xoxs-, xoxe-, xoxo-, xapp- and at least 10 of [A-Za-z0-9-]",
		"Slack API documentation, token types"},
	rSlackWebhook: {"slack-webhook", prioProvider,
		"the path after hooks.slack.com/services/ (or /workflows/, /triggers/)",
		"Slack API documentation, sending messages using incoming webhooks"},
	rStripeKey: {"stripe-key", prioProvider,
		"sk_live_, sk_test_, rk_live_, rk_test_ and at least 16 letters or digits; whsec_ and at least 24",
		"Stripe documentation, API keys and webhook signing secrets"},
	rTwilioAPIKey: {"twilio-api-key", prioProvider,
		"SK and 32 hex digits",
		"Twilio documentation, API keys (SID format)"},
	rSendGridKey: {"sendgrid-key", prioProvider,
		"SG., 22 characters, a dot and 43 characters of [A-Za-z0-9_-]",
		"Twilio SendGrid documentation, API keys"},
	rNPMToken: {"npm-token", prioProvider,
		"npm_ and 36 letters or digits",
		"npm Docs, about access tokens"},
	rPyPIToken: {"pypi-token", prioProvider,
		"pypi-AgE and at least 50 of [A-Za-z0-9_-]",
		"PyPI help, API tokens"},
	rOpenAIKey: {"openai-key", prioProvider,
		"sk-proj-, sk-svcacct-, sk-admin- and at least 20 of [A-Za-z0-9_-]; sk- and at least 32 mixing letters and digits",
		"OpenAI API reference, authentication"},
	rAnthropicKey: {"anthropic-key", prioProvider,
		"sk-ant- and at least 32 of [A-Za-z0-9_-]",
		"Anthropic API documentation, authentication"},
	rHuggingFaceToken: {"huggingface-token", prioProvider,
		"hf_ and at least 30 letters or digits",
		"Hugging Face documentation, user access tokens"},
	rGoogleOAuthSecret: {"google-oauth-secret", prioProvider,
		"GOCSPX- and at least 24 of [A-Za-z0-9_-]",
		"Google Cloud documentation, OAuth client secrets"},
	rTelegramBotToken: {"telegram-bot-token", prioProvider,
		"6 to 12 digits, a colon and 35 of [A-Za-z0-9_-]",
		"Telegram Bot API, authorizing your bot"},
	rDiscordBotToken: {"discord-bot-token", prioProvider,
		"M, N or O and 23 to 27 characters, a dot, 6, a dot and 27 to 40 (base64url)",
		"Discord developer documentation, authentication (bot token)"},
	rPrivateKey: {"private-key", prioProvider,
		"a PEM or PGP private key block, -----BEGIN … PRIVATE KEY----- through its END line (through the end of its base64 body when the END line is missing)",
		"RFC 7468 (textual encodings), RFC 4880 §6.2 (ASCII armor)"},
	rJWT: {"jwt", prioStructured,
		"a JSON Web Token: eyJ, two or more dot-separated base64url parts",
		"RFC 7519 and RFC 7515 §7.1 (compact serialization)"},
	rCardNumber: {"card-number", prioStructured,
		"13 to 19 digits, plain or grouped by single spaces or dashes, of a card network's prefix and length, passing the Luhn check",
		"ISO/IEC 7812-1 (issuer identification, Luhn check digit); PCI DSS requirement 3.4"},
	rAuthorization: {"authorization", prioHeader,
		"the credentials of an Authorization or Proxy-Authorization header after its scheme (Bearer, Basic… stay), to the line's or string's end; a bare \"Bearer <token>\"",
		"RFC 9110 §11.6.2 and §11.7.2; RFC 6750 §2.1"},
	rURLPassword: {"url-password", prioHeader,
		"the password of a URL's user information (scheme://user:PASSWORD@host); user and host stay",
		"RFC 3986 §3.2.1"},
	rPassword: {"password", prioAssigned,
		"the value assigned to a password name: password, passwd, passphrase, *_pwd, *_pass, PGPASSWORD-like words (=, :, :=, =>, JSON, YAML, env, --flag, XML); curl -u user:PASSWORD",
		"common configuration syntaxes"},
	rToken: {"token", prioAssigned,
		"the value assigned to a *token name (access_token, GITHUB_TOKEN, X-Auth-Token)",
		"common configuration syntaxes"},
	rAPIKey: {"api-key", prioAssigned,
		"the value assigned to an api_key, apikey, access_key, secret_key, private_key, client_key… name",
		"common configuration syntaxes"},
	rSecret: {"secret", prioAssigned,
		"the value assigned to a *secret or *credentials name (client_secret, SECRET, credentials)",
		"common configuration syntaxes"},
	rHighEntropy: {"high-entropy", prioEntropy,
		"a value of 16 to 4096 key characters mixing letters and digits, of Shannon entropy at least 3.5 bits a character, not a UUID, assigned to another name whose last word is key, auth, pass or sig",
		"Shannon entropy (the heuristic secret scanners use for unnamed keys)"},
}
