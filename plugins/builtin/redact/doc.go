// Package redact is the engine of the built-in `redact` plugin: it finds
// secrets and personal data in the JSON of tool results, prompt messages,
// resource contents and, when asked, tool arguments, and replaces each
// finding with `[REDACTED:<kind>]`. The plugin host (package plugins) calls
// it from the tool_post_call, prompt_post_get and resource_post_read hooks,
// and from tool_pre_call when `arguments` is on, and records the Counts in
// the audit record, never the values (docs/architecture.md, plugins).
//
// # Config
//
// The plugin's `config:` (New receives it as JSON):
//
//	plugins:
//	  - name: redact
//	    builtin: redact
//	    config:
//	      detectors: [secrets, pii]   # default: all; or kind names, e.g. [aws_access_key, email]
//	      custom:                     # default: none
//	        - name: employee_id       # the kind in the marker: [REDACTED:employee_id]
//	          pattern: 'EMP-[0-9]{6}' # RE2; with a capturing group, only the group is replaced
//	        - name: session
//	          pattern: 'session=([A-Za-z0-9]+)'
//	      arguments: false            # true: redact tools/call arguments too
//
// Keys:
//
//   - detectors: a list of `secrets`, `pii` and kind names. Absent means all;
//     an empty list means none (custom patterns only).
//   - custom: a list of {name, pattern}. A name is lower-case letters, digits
//     and `_` and must not be a built-in kind; a pattern must not match the
//     empty string.
//   - arguments: whether tool arguments are redacted before the call too.
//
// Unknown keys, unknown kinds, bad names and patterns are errors that name
// them; New reports them all at once.
//
// # Kinds
//
// Secrets (group `secrets`):
//
//	private_key     PEM private key blocks (RSA, EC, PKCS#8, OpenSSH, PGP), BEGIN to END,
//	                or to the end of the body when the END line is cut off
//	jwt             three base64url segments whose first decodes to JSON with "alg"
//	aws_access_key  AKIA, ASIA, ABIA, ACCA and 16 base32 characters
//	aws_secret_key  40 base64 characters assigned to aws_secret_access_key and the like
//	google_api_key  AIza and 35 characters
//	github_token    ghp_, gho_, ghu_, ghs_, ghr_ (36+ characters), github_pat_
//	gitlab_token    glpat-, gldt-, glrt-, glptt- (20+ characters)
//	slack_token     xoxa-, xoxb-, xoxe-, xoxp-, xoxr-, xoxs-, xapp-
//	stripe_key      sk_live_, rk_live_, sk_test_, rk_test_
//	generic_secret  the value assigned to a name ending in password, passwd, secret,
//	                token, apikey, accesskey, secretkey, privatekey, credential(s) or
//	                authorization (`_`, `-`, `.` and case ignored) with `=`, `:`, `:=`
//	                or `=>`, when it is 8+ bytes with at least 3 bits of entropy per
//	                byte and not a placeholder (${VAR}, <token>, {{ x }}, ****);
//	                the whole string value of a JSON member so named
//	                ({"password": "…"}) under the same checks; and the password
//	                of a URL (postgres://app:<password>@db/x)
//
// Personal data (group `pii`):
//
//	email        local@domain.tld (not icon@2x.png, @scope/pkg, pkg@1.2.3, root@localhost)
//	phone        E.164 (+ and 8 to 15 digits, grouped or not; 00 for +), North American
//	             (415) 555-0123 / 415-555-0123 / 1-800-555-0199, national numbers with
//	             a trunk 0 in groups (020 7946 0958); not bare digit runs, dates,
//	             versions or IP addresses
//	card_number  13 to 19 digits starting 2 to 6, compact or grouped as cards print
//	             them, passing the Luhn check
//	iban         a registered country's length, compact or in groups of four,
//	             passing the mod-97 check (capital letters only)
//
// A string that is base64 alone, 128 bytes or longer (a resource's blob, an
// image), is data and is not searched: detectors would find only chance
// matches in it, and replacing one would corrupt it.
//
// Findings are found in each string's decoded text, one pass per string
// over word starts and a few symbols (see scan.go); a document with nothing
// to find is not copied. Where two findings overlap the earlier kind in the
// lists above wins. Text inside an existing marker is never redacted again,
// so redacting twice changes nothing the second time.
package redact
