"""Secrets said to memvault never reach its files, its git history or a remote (docs/design.md,
section 18, "Secrets").

What a user pastes into a chat (an API key, a token, a password, a private key, a connection
string with its password) is found here and replaced by a placeholder, `[secret: openai-key …a1b2]`,
before a memory file is written (`Change._write` calls `withhold`: every face writes through it).
`memvault sync` refuses to push commits whose added lines hold one (`find_in_lines`), and `memvault
scrub` finds them in a vault's files and history.

Detection is detect-secrets' (Yelp's scanner, used by pre-commit hooks and CI): its plugins for the
providers it knows, imported on first use so that only commands that write load it (~25 ms), plus
plugins of memvault's own, in detect-secrets' form, for the kinds it misses (Anthropic, Google, Hugging
Face, GitHub fine-grained, bare npm tokens, newer OpenAI keys, a password said in prose) and its Shannon
entropy measure applied to candidates chosen for chat text, not code: its entropy plugins want a quoted
string, and people paste tokens unquoted. bench/secret_scan.py measures the false positives on ordinary chat
and the detection of each kind (bench/README.md, "Secrets").
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Iterable, Iterator

# A placeholder says what was withheld and, for a long key or token, its last four characters, so that the
# user can tell which key it was (as provider dashboards show them); a password shows nothing of itself.
PLACEHOLDER = re.compile(r"\[secret: [a-z0-9-]+(?: …[A-Za-z0-9_+/=-]{1,4})?\]")
SHOW_TAIL_FROM = 20  # characters: a value at least this long shows its last four
TAIL = 4

# The characters a token is made of: a match that stops inside a token (detect-secrets' Stripe pattern
# takes 24 characters of a 99-character key) is widened to the whole token, so nothing of it is left;
# `=` only at its end (padding), never before it (`GITHUB_TOKEN=ghp_...` keeps its name).
_TOKEN_CHAR = re.compile(r"[A-Za-z0-9_+/=-]")
_TOKEN_START_CHAR = re.compile(r"[A-Za-z0-9_+/-]")

# detect-secrets' secret_type -> memvault's kind (the word in the placeholder).
_KIND_OF_TYPE = {
    "Artifactory Credentials": "artifactory-token",
    "AWS Access Key": "aws-key",
    "Azure Storage Account access key": "azure-storage-key",
    "Basic Auth Credentials": "url-password",
    "Cloudant Credentials": "cloudant-password",
    "Discord Bot Token": "discord-token",
    "GitHub Token": "github-token",
    "GitLab Token": "gitlab-token",
    "IBM Cloud IAM Key": "ibm-cloud-key",
    "IBM COS HMAC Credentials": "ibm-cos-key",
    "JSON Web Token": "jwt",
    "Secret Keyword": "password",
    "Mailchimp Access Key": "mailchimp-key",
    "NPM tokens": "npm-token",
    "OpenAI Token": "openai-key",
    "Private Key": "private-key",
    "PyPI Token": "pypi-token",
    "SendGrid API Key": "sendgrid-key",
    "Slack Token": "slack-token",
    "SoftLayer Credentials": "softlayer-key",
    "Square OAuth Secret": "square-secret",
    "Stripe Access Key": "stripe-key",
    "Telegram Bot Token": "telegram-token",
    "Twilio API Key": "twilio-key",
}
# Kinds whose value is not a token: the match is the value exactly (a password in a URL stops at `@`).
_EXACT_KINDS = {"url-password", "password", "private-key", "cloudant-password", "softlayer-key"}
# Found by the entropy measure alone: the weakest evidence, the first to give way to a named kind.
_ENTROPY_KINDS = {"token", "hex-token"}
# A password or a passphrase shows nothing of itself, however long: four characters of a phrase of words are
# most of a word, and a password is short enough that every character counts.
_NO_TAIL_KINDS = {"password", "url-password", "cloudant-password"}
# Found by a word before the value ("password: ...", "secret = ..."): stronger than entropy, weaker than
# a provider's own format.
_KEYWORD_KINDS = {"password", "secret"}


@dataclass(frozen=True)
class Finding:
    """A secret in a text: its kind, where it is (`text[start:end]` is the value) and the value."""

    kind: str
    start: int
    end: int
    value: str
    field: str = "text"  # where in a memory it was: its text, or the front-matter key (withhold)

    @property
    def placeholder(self) -> str:
        tail = f" …{self.value[-TAIL:]}" if len(self.value) >= SHOW_TAIL_FROM and "\n" not in self.value \
            and self.kind not in _NO_TAIL_KINDS else ""
        return f"[secret: {self.kind}{tail}]"

    @property
    def label(self) -> str:
        """What the user is told: the placeholder without its brackets (`openai-key …a1b2`)."""
        return self.placeholder[len("[secret: "):-1]


# -- the detectors ----------------------------------------------------------------------------------

_DETECTORS = None
_DETECTORS_LOCK = threading.Lock()


def _detectors():
    """detect-secrets' plugins and memvault's, built once per process (they hold no state)."""
    global _DETECTORS
    if _DETECTORS is None:
        with _DETECTORS_LOCK:
            if _DETECTORS is None:
                _DETECTORS = _build_detectors()
    return _DETECTORS


def _build_detectors():
    from detect_secrets.plugins import (artifactory, aws, azure_storage_key, basic_auth, cloudant, discord,
                                        github_token, gitlab_token, ibm_cloud_iam, ibm_cos_hmac, jwt, keyword,
                                        mailchimp, npm, openai, private_key, pypi_token, sendgrid, slack, softlayer,
                                        square_oauth, stripe, telegram_token, twilio)
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString, HexHighEntropyString

    class AnthropicDetector(RegexBasedDetector):
        secret_type = "anthropic-key"
        denylist = [re.compile(r"sk-ant-[a-z]+\d*-[A-Za-z0-9_-]{32,}")]

    class NewerOpenAIDetector(RegexBasedDetector):
        """Project, service-account and admin keys, and keys shown without detect-secrets' T3BlbkFJ
        marker (the part OpenAI prints in its dashboard); `sk-ant-` is Anthropic's."""
        secret_type = "openai-key"
        denylist = [re.compile(r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-)[A-Za-z0-9_-]{32,}"),
                    re.compile(r"(?<![A-Za-z0-9_-])sk-(?!ant-)[A-Za-z0-9]{40,}")]

    class GoogleDetector(RegexBasedDetector):
        secret_type = "google-api-key"
        denylist = [re.compile(r"AIza[0-9A-Za-z_-]{35}"), re.compile(r"GOCSPX-[0-9A-Za-z_-]{28}")]

    class HuggingFaceDetector(RegexBasedDetector):
        secret_type = "huggingface-token"
        denylist = [re.compile(r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}")]

    class GitHubFineGrainedDetector(RegexBasedDetector):
        secret_type = "github-token"
        denylist = [re.compile(r"github_pat_[A-Za-z0-9_]{50,}")]

    class NpmBareDetector(RegexBasedDetector):
        """detect-secrets finds npm tokens in an .npmrc line only; said in a chat they stand alone."""
        secret_type = "npm-token"
        denylist = [re.compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}")]

    class StripeAnyDetector(RegexBasedDetector):
        """Test-mode and restricted keys too: a test key still opens the account's test data."""
        secret_type = "stripe-key"
        denylist = [re.compile(r"(?<![A-Za-z0-9_])(?:sk|rk)_(?:live|test)_[0-9a-zA-Z]{24,}")]

    class SlackAppDetector(RegexBasedDetector):
        secret_type = "slack-token"
        denylist = [re.compile(r"xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+", re.IGNORECASE),
                    re.compile(r"xox[abposre]-[A-Za-z0-9-]{20,}")]

    class UrlPasswordDetector(RegexBasedDetector):
        """detect-secrets' Basic Auth pattern leaves out passwords with `!`, `$`, `&` and the like, which
        real ones have."""
        secret_type = "Basic Auth Credentials"
        denylist = [re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@\[\]]*:([^\s@/\[\]]+)@[A-Za-z0-9.-]")]

    class AWSSecretDetector(RegexBasedDetector):
        """detect-secrets' AWS secret pattern wants the key quoted; said in a chat or an env line it is not."""
        secret_type = "aws-secret-key"
        denylist = [re.compile(r"(?i:aws)[^\n]{0,20}?(?i:secret|key)[^\n]{0,20}?[=:'\" ]"
                               r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])")]

    class TwilioSecretDetector(RegexBasedDetector):
        """An auth token named as one (32 hex digits, which alone look like any hash)."""
        secret_type = "twilio-key"
        denylist = [re.compile(r"(?i:twilio)[^\n]{0,40}?(?i:auth[ _-]?token|secret)\W{0,5}(?:is\W{1,3})?"
                               r"([0-9a-f]{32})\b")]

    named = [plugin() for plugin in (
        artifactory.ArtifactoryDetector, aws.AWSKeyDetector, azure_storage_key.AzureStorageKeyDetector,
        basic_auth.BasicAuthDetector, cloudant.CloudantDetector, discord.DiscordBotTokenDetector,
        github_token.GitHubTokenDetector, gitlab_token.GitLabTokenDetector, ibm_cloud_iam.IbmCloudIamDetector,
        ibm_cos_hmac.IbmCosHmacDetector, jwt.JwtTokenDetector, mailchimp.MailchimpDetector, npm.NpmDetector,
        openai.OpenAIDetector, pypi_token.PypiTokenDetector, sendgrid.SendGridDetector, slack.SlackDetector,
        softlayer.SoftlayerDetector, square_oauth.SquareOAuthDetector, stripe.StripeDetector,
        telegram_token.TelegramBotTokenDetector, twilio.TwilioKeyDetector,
        AnthropicDetector, NewerOpenAIDetector, GoogleDetector, HuggingFaceDetector, GitHubFineGrainedDetector,
        NpmBareDetector, StripeAnyDetector, SlackAppDetector, UrlPasswordDetector, AWSSecretDetector,
        TwilioSecretDetector)]
    return _Detectors(named, keyword.KeywordDetector(), private_key.PrivateKeyDetector(),
                      Base64HighEntropyString(limit=ENTROPY_LIMIT), HexHighEntropyString(limit=HEX_ENTROPY_LIMIT))


# The entropy rules, tuned on chat text (bench/secret_scan.py; bench/README.md, "Secrets"). detect-secrets'
# defaults are 4.5 bits per character for base64 and 3.0 for hex, on quoted strings of code.
ENTROPY_LIMIT = 4.5  # a bare token: random base64 of 32 characters or more measures ~4.7-5.2
CONTEXT_ENTROPY_LIMIT = 3.5  # a token right after a word like "token" or "key": shorter ones count too
HEX_ENTROPY_LIMIT = 3.0
MIN_TOKEN = 24  # characters of a bare high-entropy token (below, English compounds and ids get in)
MIN_CONTEXT_TOKEN = 16
# A bare run of hex digits is a commit, a digest or a colour far more often than a secret: it counts only
# after a word that says it is one.
MIN_HEX_TOKEN = 32
# A run of base64 characters standing alone; `=` only as padding at its end (`KEY=value` is two words).
_CANDIDATE = re.compile(r"(?<![A-Za-z0-9_+/.@:-])[A-Za-z0-9_+/-]{%d,}={0,2}(?![A-Za-z0-9_+/=@-])" % MIN_CONTEXT_TOKEN)
# A word that says a secret follows, within CONTEXT_WINDOW characters before a token on its line.
_CREDENTIAL_WORD = re.compile(
    r"(?i)\b(?:api[ _-]?key|access[ _-]?key|secret|token|auth|bearer|password|passwd|pwd|credentials?|"
    r"private[ _-]?key|client[ _-]?secret|key)s?\b")
CONTEXT_WINDOW = 60
# "key" after one of these words names an id, not a secret ("cache key", "primary key", "s3 object key"), and so
# does "key" before one of the second ("key id", "key fingerprint").
_KEY_OF_AN_ID = re.compile(
    r"(?i)(?:cache|primary|foreign|partition|sort|row|object|s3|dedupe?|idempotency|composite|unique|lookup|hash|"
    r"map|index|build|routing|shard|sharding|range|natural|surrogate|translation|i18n|registry|public|gpg|pgp|"
    r"hotkey|music|musical|file)[ _-]?$")
_KEY_THEN_ID = re.compile(r"(?i)^[ _-]?(?:ids?|fingerprints?|names?|tags?|numbers?|no\.?|servers?|rings?)\b")
# A word that says an id, a digest or an address follows (issue 44: a commit id, a cache key and a request id
# were withheld): with no credential word before it, a token after one is not a secret.
_ID_WORD = re.compile(
    r"(?i)(?:\b|_)(?:ids?|identifier|request|trace|span|event|commit|hash|digest|checksum|sha\d*|md5|blake2b?|"
    r"etag|order|invoice|ticket|charge|customer|build|uuid|ulid|guid|nanoid|nonce|seed|version|revision|rev|job|"
    r"run|batch|message|thread|file|container|pod|instance|image|bucket|url|link|address|wallet|base64|encoded|"
    r"integrity|lockfile|serial|tracking|booking|reference|ref|uid|correlation|delivery|response|object|video|"
    r"share|torrent|magnet)(?:\b|_)")
# Prefixes of providers' object ids, which are not keys: Stripe's charges, customers, intents..., OpenAI's and
# Anthropic's responses, files, threads, runs, messages and tool calls, and a digest's algorithm.
_ID_PREFIX = re.compile(
    r"^(?:ch|cus|pi|pm|in|sub|si|price|prod|evt|txn|req|acct|src|seti|cs|po|tr|re|py|ii|file|asst|thread|run|"
    r"msg|call|batch|toolu|chatcmpl|resp|org|user|step|ftjob|vs|ws|order|ref|obj|job|task|build|node|item|"
    r"sha\d+|md5)[_-]", re.I)
_PUBLIC_KEY = re.compile(r"(?i)\bpublic[ _-]?key|\b(?:ssh-(?:rsa|ed25519|dss)|ecdsa-sha2-\S+|fingerprint)\s+\S*$")

# A password said in prose (issue 44): "my password is hunter2", "pw: Tr0ub4dor&3", "Wifi password hunter2-blue-42"
# (no verb), "Summer2026! is the wifi password", "my passphrase is correct horse battery staple" (words),
# "mysql -u root -pS3cr3t" (a command line), "creds are admin/S3cret!", a door code, in a few languages.
_PASSWORD_WORDS = (r"(?:passwords?|passwd|passcode|passphrase|pass ?words?|pwd|pw|pin(?: code| number)?|wi-?fi key|"
                   r"contraseña|passwort|kennwort|mot de passe|senha|wachtwoord|lösenord)")
# A code that opens something: its value is digits (and `#`, `*`, `-`).
_CODE_WORDS = (r"(?:(?:door|gate|alarm|garage|lock|safe|entry|access|keypad|building|lockbox|key ?safe)(?:'s)?[ -]code|"
               r"combination|combo)")
_VERB = r"(?:\s+(?:is|was|are|were|ist|est|es|é|är)(?=\s)|\s*[:=])(?:\s+(?:now|still|currently))?\s*"
_VALUE = r"(?:[\"'`“‘](?P<quoted>[^\"'`”’\n]{1,80})[\"'`”’]|(?P<bare>[^\s\"'`]{1,80}))"
# ... with a verb or a colon: "the password for grafana is X", "password: X", "set the password to X"
_PROSE_PASSWORD = re.compile(
    r"(?i)\b(?P<word>" + _PASSWORD_WORDS + "|" + _CODE_WORDS + r"|wi-?fi|pass)\b"
    r"(?:\s+(?:for|to|of|on|at)\s+[^\n:=.!?]{1,40}?)?(?P<verb>" + _VERB + ")" + _VALUE)
_CHANGED_TO = re.compile(
    r"(?i)\b(?:chang|set|reset|updat|switch)\w*\s+(?:\w+\s+){0,4}?(?:" + _PASSWORD_WORDS + r")\s+to\s+" + _VALUE)
# ... without one: "Wifi password hunter2-blue-42", "the router pw MoonPie_77", "door code 2580"
_BARE_PASSWORD = re.compile(
    r"(?i)\b(?P<word>(?:passwords?|passwd|passcode|passphrase|pass ?word|pwd|pw|contraseña|passwort|senha)"
    r"|" + _CODE_WORDS + r")\s+(?P<bare>[^\s\"'`]{4,80})")
# ... or after what it is for: "password for the kids' ipad 2468" (digits, or letters with digits and signs)
_BARE_FOR = re.compile(r"(?i)\b(?:passwords?|passwd|passcode|pwd|pw|pin)\s+for\s+(?P<rest>[^\n:=!?]{1,60})")
# ... before its word: "Summer2026! is the wifi password", "use X as the password"
_PASSWORD_FIRST = re.compile(
    r"(?i)(?:^|(?<=\s)|\buse\s+)(?P<bare>[^\s\"'`]{4,80})\s+(?:is|was|as)\s+(?:the|my|our|your|his|her|their|a)\s+"
    r"(?:[\w-]+\s+){0,2}?(?:" + _PASSWORD_WORDS + r")\b")
# ... on a command line: mysql's -p<password>, --password=, sshpass -p, redis-cli -a, curl -u user:password
_ARG = r"(?:'(?P<{0}q>[^'\n]+)'|\"(?P<{0}d>[^\"\n]+)\"|(?P<{0}>[^\s'\"]+))"
_COMMAND_PASSWORD = re.compile(
    r"\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^\n]*?\s-p" + _ARG.format("a")
    + r"|--pass(?:word)?(?:=|\s+)(?!-)" + _ARG.format("b")
    + r"|\bsshpass\s+-p\s*" + _ARG.format("c")
    + r"|\bredis-cli\b[^\n]*?\s-a\s+" + _ARG.format("d")
    + r"|\bcurl\b[^\n]*?\s(?:-u|--user)\s+[^\s:]+:" + _ARG.format("e"))
# ... as a login: "creds are admin/m0nk3y%598", "login admin:S3cret-9"
_CREDS = re.compile(r"(?i)\b(?:creds|credentials|login)\b\s*(?:(?:are|is|:|=)\s*)?[\w.@+-]{1,40}(?:\s*/\s*|:)"
                    r"(?P<bare>[^\s\"'`/:]{4,80})")
# Every keyword the patterns above or detect-secrets' start from: a line without one is not looked at
# further (the patterns are the slow part of a scan).
_ANY_KEYWORD = re.compile(r"(?i)pass|pwd|pw\b|pin\b|secret|key|contrase|senha|wi-?fi|code\b|combin|combo|creds|"
                          r"credential|login|mysql|mariadb|redis-cli|curl")
_ANY_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_PRIVATE_KEY_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\n\s*\n")
# Words that follow "password is" in a sentence about a password rather than in one that says it.
_NOT_A_PASSWORD = re.compile(
    r"(?i)^(?:a|an|the|my|your|his|her|our|their|its|this|that|it|not|no|now|still|too|very|so|in|on|at|with|by|"
    r"for|from|of|to|as|if|what|which|who|where|when|how|why|whatever|something|anything|nothing|mine|yours|same|"
    r"written|saved|stored|required|needed|wrong|incorrect|correct|right|weak|strong|long|short|easy|hard|"
    r"simple|different|changed|reset|expired|missing|empty|blank|set|ok|okay|fine|good|bad|protected|"
    r"case|hidden|secret|private|there|here|below|above|attached|encrypted|hashed|see|ask|check|use|none|unknown|"
    r"tbd|todo|n/a|also|just|only|then|usually|probably|likely|really|actually|always|never|again|already|"
    r"down|up|off|out|open|new|old|gone|known|unique|mandatory|temporary|invalid|valid|optional|useless|"
    r"enough|ready|done|sent|shared|usual|same|standard|default|obvious|complicated|complex|random|unchanged|"
    r"typed|given|printed|visible|asked|being|going|supposed|about|like|under|over|inside|behind|somewhere|"
    r"fast|slow|broken|working|enabled|disabled|needed|lost|forgotten|known|withheld|kept|held|shown|given|taken|"
    r"hidden|stolen|chosen|found|told|said|made|seen|leaked|bought|sold|meant|based|due|about|over)$")
# A word that is not a password after "is": an adjective or a participle ("the password is mandatory").
_WORD_NOT_A_PASSWORD = re.compile(r"(?i)(?:ed|ing|ible|able|ive|ous|ful|less|ent|ant|ic|al|ary|ure|ish)$")
# Words a sentence is made of, never a passphrase's ("the password is long and hard to remember").
_FUNCTION_WORDS = frozenset(
    "a an the and or but nor of to in on at for with from by as is was are were be been being it its i you he she "
    "we they me him her us them my your his our their this that these those not no so if then than too very just "
    "also still now when where what which who whom whose how why because since until about into over under after "
    "before again there here do does did have has had will would can could should may might must all any some "
    "every each same other only once both either neither up down out off".split())
_PASSPHRASE = re.compile(r"[a-zà-ÿ]+(?:[ -][a-zà-ÿ]+){2,9}")


def _password_like(value: str) -> bool:
    """A value said without a verb (or before its word) is taken for a password when it looks like one: six
    characters or more, with a digit or a sign, or digits alone (a PIN said as "pin code 482913")."""
    if len(value) < 6 or value.startswith(("/", "~", "./", "http")) or "://" in value:
        return False
    if re.fullmatch(r"v?\d+(?:\.\d+)+|\d{4}-\d\d-\d\d(?:T[\d:.]+Z?)?|\d+(?:st|nd|rd|th|x|%|s|h|m|min|ms|gb|mb|kb|k)",
                    value, re.I):
        return False  # a version, a date, a count
    return bool(re.search(r"[\d\W_]", value))


def _code_like(value: str) -> bool:
    return re.fullmatch(r"[\d#*][\d#* -]{2,18}[\d#*]", value) is not None


_VERB_WORDS = {"is", "was", "are", "were", "ist", "est", "es", "é", "är"}


def _passphrase_at(line: str, start: int, whole: bool = False) -> str | None:
    """Three words or more of lower-case letters from `start` (joined by spaces), none a word sentences are
    made of, ending the clause: a passphrase ("correct horse battery staple"), not a sentence. whole: the
    words must end the clause themselves (said without a verb, "backup passphrase x y z"), not stop at a
    word such as "than"."""
    run = re.match(r"[a-zà-ÿ]+(?: [a-zà-ÿ]+)*", line[start:])
    if run is None:
        return None
    words = run.group().split(" ")
    kept = []
    for word in words:
        if word in _FUNCTION_WORDS:
            break
        kept.append(word)
    if len(kept) < 3 or any(len(word) < 3 for word in kept) or whole and len(kept) < len(words):
        return None
    phrase = " ".join(kept)
    rest = line[start + len(phrase):]
    if len(kept) == len(words) and re.match(r"\s+[A-Z0-9]", rest) and not re.match(r"\s+I\b", rest):
        return None  # the run stops before a name or a number: part of a longer sentence
    return phrase


def _said_value(line: str, match: re.Match, word: str, colon: bool) -> tuple[int, str] | None:
    """The value of a password said with a verb or a colon (`match` has `quoted` or `bare`), or None when the
    word after it is not one."""
    if match.group("quoted") is not None:
        return match.start("quoted"), match.group("quoted")
    start, value = match.start("bare"), match.group("bare")
    code = re.fullmatch(_CODE_WORDS, word, re.I) is not None
    if not code and not word.startswith("pin"):
        phrase = _passphrase_at(line, start)
        if phrase is not None:
            return start, phrase
    value = value.rstrip(".,;:)]}")
    if code:
        return (start, value) if _code_like(value) else None
    if value.isalpha():
        # A word of letters alone is a password only after a colon ("pw: sunshine") or when it is no word a
        # sentence about a password goes on with ("the password is ready", "the PIN is four digits").
        if word.startswith("pin") or not colon and (_NOT_A_PASSWORD.match(value) or _WORD_NOT_A_PASSWORD.search(value)
                                                    or value[0].isupper()):
            return None
    return start, value


def _prose_passwords(line: str) -> Iterator[tuple[int, str, str]]:
    """(start, value, "password") of each password said in prose on a line (the patterns above)."""
    for match in _PROSE_PASSWORD.finditer(line):
        word = match.group("word").lower()
        colon = re.search(r"[:=]", match.group("verb")) is not None
        if word in ("wifi", "wi-fi", "pass"):
            # "wifi: X" (a WPA key has eight characters or more), "user: anne, pass: X"; not "wifi: down again",
            # nor "boarding pass: DL1234"
            value = match.group("quoted") or match.group("bare") or ""
            if not colon or not _password_like(value.rstrip(".,;:)]}")) or \
                    (word.startswith("wi") and len(value) < 8) or \
                    (word == "pass" and not re.search(r"(?i)\b(?:user(?:name)?|login)\b", line[:match.start()])):
                continue
        found = _said_value(line, match, word, colon)
        if found is not None:
            yield (*found, "password")
    for match in _CHANGED_TO.finditer(line):
        found = _said_value(line, match, "password", False)
        if found is not None:
            yield (*found, "password")
    for match in _BARE_PASSWORD.finditer(line):
        word, start, value = match.group("word").lower(), match.start("bare"), match.group("bare")
        if value.lower() in _VERB_WORDS or value[:1] in ":=":
            continue
        if word == "passphrase":
            phrase = _passphrase_at(line, start, whole=True)
            if phrase is not None:
                yield start, phrase, "password"
                continue
        value = value.rstrip(".,;:)]}")
        if re.fullmatch(_CODE_WORDS, word, re.I):
            if _code_like(value):
                yield start, value, "password"
        elif _password_like(value):
            yield start, value, "password"
    for match in _BARE_FOR.finditer(line):
        for word in list(re.finditer(r"[^\s\"'`]+", match.group("rest")))[1:5]:  # after the thing it is for
            value = word.group().rstrip(".,;:)]}")
            if _code_like(value) or _password_like(value) and re.search(r"[A-Za-z]", value) \
                    and re.search(r"\d", value) and re.search(r"[^\w]|_", value):
                yield match.start("rest") + word.start(), value, "password"
                break
    for match in _PASSWORD_FIRST.finditer(line):
        value = match.group("bare").rstrip(",;:")
        if _password_like(value):
            yield match.start("bare"), value, "password"
    for match in _COMMAND_PASSWORD.finditer(line):
        for name in (f"{g}{suffix}" for g in "abcde" for suffix in ("", "q", "d")):
            if match.group(name):
                yield match.start(name), match.group(name), "password"
                break
    for match in _CREDS.finditer(line):
        value = match.group("bare").rstrip(".,;)]}")
        if _password_like(value):
            yield match.start("bare"), value, "password"


class _Detectors:
    def __init__(self, named, keyword, private_key, base64_entropy, hex_entropy):
        self.named = named
        self.keyword = keyword
        self.private_key = private_key
        self.base64_entropy = base64_entropy
        self.hex_entropy = hex_entropy

    def scan_line(self, line: str, offset: int) -> Iterator[Finding]:
        for plugin in self.named:
            kind = _KIND_OF_TYPE.get(plugin.secret_type, plugin.secret_type)
            for value in set(plugin.analyze_string(line)):
                if not value or _filtered(value):
                    continue
                for start in _occurrences(line, value):
                    yield _finding(line, offset, start, start + len(value), _refine(kind, value), kind)
        yield from self._keyword_values(line, offset)
        yield from self._entropy_tokens(line, offset)

    def _keyword_values(self, line: str, offset: int) -> Iterator[Finding]:
        """A value after a word that says it is a secret: detect-secrets' keyword patterns for
        assignments (`DB_PASSWORD=...`, `api_key: ...`, `"secret": "..."`), and memvault's for a
        password said in prose ("my password is hunter2"). The value is the first word after it
        (detect-secrets takes the rest of the line, which in a sentence is the sentence)."""
        from detect_secrets.filters import heuristic
        from detect_secrets.plugins.keyword import CONFIG_DENYLIST_REGEX_TO_GROUP

        if not _ANY_KEYWORD.search(line):
            return
        spans = []
        for raw in self.keyword.analyze_string(line, denylist_regex_to_group=CONFIG_DENYLIST_REGEX_TO_GROUP):
            value = re.split(r"[\s,;]", raw.strip(), maxsplit=1)[0].strip("\"'`").rstrip(".,;:)]}")
            start = line.find(value) if value else -1
            if start >= 0 and not value.isalpha() and len(value) >= 4 and not re.search(r"\[secret:\s*$",
                                                                                          line[:start]):
                said = line[:start]
                spans.append((start, value, "password" if re.search(_PASSWORD_WORDS + r"\w*\W*$", said, re.I)
                              else "secret"))
        spans.extend(_prose_passwords(line))
        if spans and heuristic.is_indirect_reference(line):  # password = os.environ["DB_PASSWORD"]
            return
        for start, value, kind in spans:
            if not value or _NOT_A_PASSWORD.match(value) or _filtered(value, digits=kind == "password") \
                    or re.search(r"[(\[{<]", value[:1]) \
                    or re.search(r"\w[(\[]", value):
                continue
            if kind == "secret" and _PROSE_WORDS.fullmatch(value):
                continue  # "secret_scan: held-out", "api_key: read-only": words, not a key (a passphrase stays one)
            yield Finding(kind, offset + start, offset + start + len(value), value)

    def _entropy_tokens(self, line: str, offset: int) -> Iterator[Finding]:
        for match in _CANDIDATE.finditer(line):
            token = match.group()
            window = line[max(0, match.start() - CONTEXT_WINDOW):match.start()]
            if _PUBLIC_KEY.search(window):
                continue  # an SSH public key, a fingerprint: meant to be shared
            named = _names_a_secret(window)
            if _filtered(token) or not re.search(r"\d", token) or not re.search(r"[A-Za-z]", token):
                continue
            if not named and (_ID_PREFIX.match(token) or _ID_WORD.search(window)):
                continue  # a provider's object id, a digest, a request id, a cache key: not a secret
            if re.fullmatch(r"[0-9a-fA-F]+", token):
                if len(token) >= MIN_HEX_TOKEN and named \
                        and self.hex_entropy.calculate_shannon_entropy(token) > HEX_ENTROPY_LIMIT:
                    yield Finding("hex-token", offset + match.start(), offset + match.end(), token)
                continue
            if "/" in token and not named and re.search(r"[A-Za-z]{3,}/[A-Za-z]{3,}|(?:^|/)(?:[a-z]{3,}|\d{2,4})/",
                                                          token):
                continue  # a path (src/memvault/files, uploads/2024/05/...), not a key: a key's slashes sit
                # between random characters
            limit, shortest = (CONTEXT_ENTROPY_LIMIT, MIN_CONTEXT_TOKEN) if named else (ENTROPY_LIMIT, MIN_TOKEN)
            if len(token) >= shortest and self.base64_entropy.calculate_shannon_entropy(token) > limit:
                yield Finding("token", offset + match.start(), offset + match.end(), token)

    def private_key_blocks(self, text: str) -> Iterator[Finding]:
        """A private key is a block of lines: from its header (detect-secrets' list, and any `-----BEGIN ...
        PRIVATE KEY-----` such as an encrypted one) to its END line, else to a blank line or the end."""
        if "PRIVATE KEY" not in text and "PuTTY-User-Key-File" not in text:
            return
        for header in (*self.private_key.denylist, _ANY_PRIVATE_KEY):
            for match in header.finditer(text):
                start = text.rfind("\n", 0, match.start()) + 1
                line_start = text[start:match.start()]
                start += len(line_start) - len(line_start.lstrip(" \t>"))  # keep a quote's `> ` and indent
                found = _PRIVATE_KEY_END.search(text, match.end())
                if found is None:
                    end = len(text)
                else:  # through its END line, or up to the blank line that ends a block cut short
                    end = found.end() if found.group().startswith("-") else found.start()
                yield Finding("private-key", start, end, text[start:end])


def _names_a_secret(window: str) -> bool:
    """Whether the words before a token say it is a secret ("token", "api key", "secret"), a "key" of an id
    ("cache key", "key id") not counted."""
    for word in _CREDENTIAL_WORD.finditer(window):
        if word.group().lower().rstrip("s") == "key" and (_KEY_OF_AN_ID.search(window[:word.start()])
                                                          or _KEY_THEN_ID.match(window[word.end():])):
            continue
        return True
    return False


def _occurrences(line: str, value: str) -> Iterator[int]:
    start = line.find(value)
    while start >= 0:
        yield start
        start = line.find(value, start + len(value))


def _finding(line: str, offset: int, start: int, end: int, kind: str, base_kind: str) -> Finding:
    name = re.match(r"[A-Za-z]+=", line[start:end])  # detect-secrets' Azure match starts with `AccountKey=`
    if name and end - start - name.end() >= 16:
        start += name.end()
    if base_kind not in _EXACT_KINDS:  # widen to the whole token
        while start > 0 and _TOKEN_START_CHAR.match(line[start - 1]):
            start -= 1
        while end < len(line) and _TOKEN_CHAR.match(line[end]):
            end += 1
    return Finding(kind, offset + start, offset + end, line[start:end])


# Lower-case words joined by hyphens or underscores: prose after a keyword, never a generated key.
_PROSE_WORDS = re.compile(r"[a-z]+(?:[-_][a-z]+)+")


def _refine(kind: str, value: str) -> str:
    if kind == "aws-key":
        return "aws-access-key" if re.match(r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)", value) else "aws-secret-key"
    if kind == "slack-token" and value.startswith("https://"):
        return "slack-webhook"
    return kind


# A value that stands in for a secret in an example (an assistant's code, a how-to): an environment
# variable's name, "your-api-key", "sk-...", "xxxx", "changeme", the word "password" itself.
_STAND_IN = re.compile(
    r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$|(?i:your|example|placeholder|redacted|dummy|sample|xxxx|\.\.\.|…|\*\*\*|"
    r"^(?:password|passwd|pass|secret|changeme|change_me|admin|root|guest|test|token|none|null|true|false)\d?$)")


def _filtered(value: str, digits: bool = False) -> bool:
    """detect-secrets' heuristic filters that fit chat text: not a template (`{key}`, `<token>`,
    `${VAR}`), not a variable (`$API_KEY`), not a UUID, not a sequence (`abcdef123456`), at least one
    letter (digits: or a digit, for a PIN or a door code); and memvault's: not a stand-in of an example
    (`YOUR_API_KEY`, `sk-...`), not a placeholder of memvault's."""
    from detect_secrets.filters import heuristic

    return (heuristic.is_templated_secret(value) or heuristic.is_prefixed_with_dollar_sign(value)
            or heuristic.is_potential_uuid(value) or heuristic.is_sequential_string(value)
            or (not re.search(r"[A-Za-z0-9]", value) if digits else heuristic.is_not_alphanumeric_string(value))
            or value.startswith("[secret:")
            or _STAND_IN.search(value) is not None)


# -- the operations ---------------------------------------------------------------------------------

def scan(text: str) -> list[Finding]:
    """The secrets in `text`, in order, none overlapping (a named kind wins over an entropy guess, then
    the longer value), none inside a placeholder already there."""
    if not text:
        return []
    detectors = _detectors()
    kept = [p.span() for p in PLACEHOLDER.finditer(text)]
    found: list[Finding] = list(detectors.private_key_blocks(text))
    offset = 0
    for line in text.split("\n"):
        if line.strip():
            for start, piece in _windows(line):
                found.extend(detectors.scan_line(piece, offset + start))
        offset += len(line) + 1
    found.sort(key=lambda f: (f.kind in _ENTROPY_KINDS, f.kind in _KEYWORD_KINDS, -(f.end - f.start), f.start))
    chosen: list[Finding] = []
    for finding in found:
        if any(finding.start < end and start < finding.end for start, end in kept):
            continue
        chosen.append(finding)
        kept.append((finding.start, finding.end))
    return sorted(chosen, key=lambda f: f.start)


# A line is scanned in windows of this many characters, each overlapping the next by LINE_OVERLAP: the
# detectors' regular expressions take time that grows with the square of a line's length (a 256 KiB line
# of one word: 56 s; a chat message of 1 MiB on one line did not finish in 20 minutes). A secret shorter
# than the overlap is whole in some window; a window's cut copy of it is shorter and loses to the whole one.
LINE_WINDOW = 2048
LINE_OVERLAP = 512


def _windows(line: str):
    if len(line) <= LINE_WINDOW:
        yield 0, line
        return
    step = LINE_WINDOW - LINE_OVERLAP
    for start in range(0, len(line) - LINE_OVERLAP, step):
        yield start, line[start:start + LINE_WINDOW]


def redact(text: str, findings: list[Finding] | None = None) -> str:
    """`text` with each secret replaced by its placeholder."""
    findings = scan(text) if findings is None else findings
    for finding in sorted(findings, key=lambda f: f.start, reverse=True):
        text = text[:finding.start] + finding.placeholder + text[finding.end:]
    return text


def holds_secret(text: str) -> bool:
    """Whether `text` holds a secret or a placeholder of one (a fact learned from a turn that held a
    secret and that names it either way is not learned)."""
    return bool(PLACEHOLDER.search(text) or scan(text))


@dataclass(frozen=True)
class LineFinding:
    """A secret on a line of a file: for `sync`'s refusal and `scrub`'s report (never the value)."""

    path: str
    line: int
    kind: str
    label: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.label}"


def find_in_lines(path: str, lines: Iterable[tuple[int, str]]) -> list[LineFinding]:
    """The secrets on the given (line number, text) lines of a file (a commit's added lines)."""
    numbered = list(lines)
    if not numbered:
        return []
    text = "\n".join(line for _, line in numbered)
    starts, offset = [], 0
    for _, line in numbered:
        starts.append(offset)
        offset += len(line) + 1
    out = []
    import bisect

    for finding in scan(text):
        row = bisect.bisect_right(starts, finding.start) - 1
        out.append(LineFinding(path, numbered[row][0], finding.kind, finding.label))
    return out


# -- at the door: what a write does with a secret ---------------------------------------------------
# Change._write calls `withhold` before a memory file is written (every face, every import, learning,
# episodes and summaries write through it), and `keep` after; hand edits that reindex or sync commit
# go through `withhold_files`. docs/design.md, "Secrets", says why the values are kept where they are.

# The values withheld, one JSON object a line, in the sidecar (never committed; owner-only): a false
# positive must not cost the user's words, and the user may want to see what was held back.
WITHHELD_FILE = "withheld.jsonl"
# Front-matter keys memvault writes itself that hold no one's words (ids, times, hashes, paths): not
# scanned. Every other string in the front matter is (a `source` URL with a password, an imported
# note's own keys, the words a fact was learned from).
_OWN_KEYS = {"id", "role", "conversation_id", "created_at", "updated_at", "deleted_at", "restored_at",
             "replaces", "replaced_by", "learned_from", "episode_id", "turn_ids", "imported_sha256",
             "original_conversation_id", "original_message_id", "started_at", "ended_at", "origin",
             "imported_from", "deleted_reason", "summary_kind", "boundary"}


def enabled(vault) -> bool:
    return bool(getattr(vault.settings, "secret_scan", True))


def warm(vault) -> None:
    """Import detect-secrets and build the plugins now (a server's warm-up), when the vault scans."""
    if enabled(vault):
        scan("warm up")


def withhold(vault, memory, force: bool = False, every_key: bool = False) -> list[Finding]:
    """Replace the secrets of a memory about to be written by placeholders, in its text and in the
    strings of its front matter; returns what was found (nothing when the vault's secret_scan is off,
    unless force: `memvault scrub`, which the user asked for). every_key: memvault's own keys too (ids,
    hashes: never scanned at the door, but a commit of an older memvault, or a hand edit, may hold a
    secret there; scrub's rewrite of history)."""
    if not force and not enabled(vault):
        return []
    import dataclasses

    found: list[Finding] = []

    def clean(value, field):
        if isinstance(value, str):
            findings = scan(value)
            if findings:
                found.extend(f if field == "text" else dataclasses.replace(f, field=field) for f in findings)
                return redact(value, findings)
            return value
        if isinstance(value, list):
            return [clean(item, field) for item in value]
        if isinstance(value, dict):
            return {key: clean(item, field) for key, item in value.items()}
        return value

    memory.text = clean(memory.text, "text")
    for key in list(memory.extra):
        if every_key or key not in _OWN_KEYS:
            memory.extra[key] = clean(memory.extra[key], key)
    return found


def as_stored(vault, text: str, extra: dict) -> tuple[str, dict]:
    """A text and front matter as the door will store them, secrets as placeholders: for what must match
    the file written (the hash an import keeps of a note it wrote)."""
    from memvault.store.files import Memory

    memory = Memory("", "note", "", None, text, dict(extra))
    withhold(vault, memory)
    return memory.text, memory.extra


@dataclass
class Withheld:
    """What one write held back: the memory (where it went) and what each secret was (never its value)."""

    memory_id: str
    path: str
    labels: list[str]

    def to_json(self) -> dict:
        return {"id": self.memory_id, "path": self.path, "secrets": self.labels}


def keep(vault, command: str, memory, findings: list[Finding]) -> Withheld:
    """Record the values withheld from a memory just written in .memvault/withheld.jsonl (created
    owner-only), and return what the user is told. A record that cannot be written is said and skipped:
    the secret is then nowhere, which is the safe side."""
    import json
    import os

    from memvault.store import files

    rel = memory.path.relative_to(vault.root).as_posix() if memory.path is not None else ""
    line = json.dumps({"at": files.format_time(files.utcnow()), "command": command, "id": memory.id, "path": rel,
                       "secrets": [{"kind": f.kind, "placeholder": f.placeholder, "value": f.value,
                                    **({"field": f.field} if f.field != "text" else {})}
                                   for f in findings]}, ensure_ascii=False)
    target = vault.sidecar / WITHHELD_FILE
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            if os.fstat(fd).st_mode & 0o077:
                os.fchmod(fd, 0o600)
            os.write(fd, (line + "\n").encode("utf-8"))
        finally:
            os.close(fd)
    except OSError as exc:
        vault.say(f"memvault: warning: could not record the withheld value in {target}: {exc.strerror or exc}; "
                  "it is not stored anywhere")
    return Withheld(memory.id, rel, [f.label for f in findings])


def notice(withheld: list[Withheld], root) -> str:
    """One line for everything a command withheld."""
    labels = [label for w in withheld for label in w.labels]
    shown = ", ".join(labels[:4]) + (f", … ({len(labels) - 4} more)" if len(labels) > 4 else "")
    where = withheld[0].path if len(withheld) == 1 else f"{len(withheld)} memories"
    count = "a secret" if len(labels) == 1 else f"{len(labels)} secrets"
    return (f"memvault: withheld {count} ({shown}) from {where}: the file holds a placeholder; the "
            f"value{'s are' if len(labels) != 1 else ' is'} kept in {root}/.memvault/{WITHHELD_FILE}, which git "
            "never sees")


def withhold_files(vault, change, paths: Iterable) -> list:
    """Hand edits about to be committed as they are (reindex, sync, a command's commit of a hand edit
    first): each file holding a secret is rewritten with placeholders and recorded as withheld. Returns
    the paths rewritten (the caller has the index take them in again)."""
    from memvault.store import files
    from memvault.errors import MemoryFileError

    if not enabled(vault):
        return []
    rewritten = []
    for path in paths:
        if not path.is_file() or not files.is_memory_file(path):
            continue
        try:
            memory, _ = files.read_memory(path, vault.root)
        except MemoryFileError:
            continue  # left out of the index and of the commit already
        findings = withhold(vault, memory)
        if not findings:
            continue
        files.write_memory(vault.root, memory, path)
        change.withheld.append(keep(vault, change.command, memory, findings))
        rewritten.append(path)
    return rewritten


# -- a conversation id: a name that becomes a path, a front-matter key and part of a commit message -------

_ID_KEYS = ("conversation_id", "original_conversation_id")


def secrets_in_id(conversation_id: str) -> list[Finding]:
    """The secrets of a named kind in a conversation id (an entropy guess is not one: ids are random-looking)."""
    return [f for f in _id_findings(conversation_id) if f.kind not in _ENTROPY_KINDS] if conversation_id else []


_ID_CACHE: dict[str, list[Finding]] = {}


def _id_findings(conversation_id: str) -> list[Finding]:
    found = _ID_CACHE.get(conversation_id)
    if found is None:
        found = scan(conversation_id)
        if len(_ID_CACHE) > 4096:
            _ID_CACHE.clear()
        _ID_CACHE[conversation_id] = found
    return found


def refuse_secret_id(vault, conversation_id: str) -> None:
    """InvalidConversationId when a conversation id holds a secret (`add -c ghp_...`): it would become the
    folder's name, the front matter's conversation_id and part of the commit message, which git keeps and a
    sync pushes, where no placeholder can stand in for it. Refused at the door, before anything is written."""
    if not enabled(vault):
        return
    found = secrets_in_id(conversation_id)
    if found:
        from memvault.errors import InvalidConversationId

        raise InvalidConversationId(
            f"the conversation id holds a secret ({', '.join(f.label for f in found)}): a conversation id is a "
            "folder's name, the front matter's conversation_id and part of the commit message, which git keeps "
            "and a sync pushes; name the conversation otherwise (nothing was written)")


def withhold_ids(memory) -> list[Finding]:
    """`memvault scrub` of a memory whose conversation id (or the original one an import kept) holds a secret:
    the id becomes its placeholder (`[secret: github-token …a1b2]`), so that the memory moves to that
    conversation's folder. Returns what was found (field: the key)."""
    import dataclasses

    found: list[Finding] = []
    for key in _ID_KEYS:
        value = memory.conversation_id if key == "conversation_id" else memory.extra.get(key)
        if not isinstance(value, str):
            continue
        findings = secrets_in_id(value)
        if not findings:
            continue
        found.extend(dataclasses.replace(f, field=key) for f in findings)
        if key == "conversation_id":
            memory.conversation_id = redact(value, findings)
        else:
            memory.extra[key] = redact(value, findings)
    return found


def clean_name(name: str) -> str:
    """A path's part (a folder named after a conversation id) with the secrets of a named kind in it replaced:
    the folder of the conversation whose id is the placeholder (files.conversation_slug of it)."""
    from memvault.store import files

    found = secrets_in_id(name)
    return files.conversation_slug(redact(name, found)) if found else name


def redact_history(vault, entry: dict) -> dict:
    """A `log` entry (LogEntry.to_json) with the secrets of its texts as placeholders: git history may
    hold one from before it was withheld (an older vault, a hand commit), and an agent's model is not
    shown it (MCP's memory_history)."""
    if enabled(vault):
        for change in entry.get("changes", ()):
            for key in ("text", "before", "cause"):
                if isinstance(change.get(key), str):
                    change[key] = redact(change[key])
    return entry


def withhold_hand_edit(vault, memory, path) -> bool:
    """A file edited by hand that reindex (or sync, or a watch) reads: its secrets become placeholders in
    the file before the index reads it, so that neither the index nor the hand edit's commit holds them.
    Whether the file was rewritten."""
    from memvault.store import files

    findings = withhold(vault, memory)
    if not findings:
        return False
    files.write_memory(vault.root, memory, path)
    vault.say(notice([keep(vault, "reindex", memory, findings)], vault.root))
    return True


def for_prompt(vault, results: list, summary: str | None) -> str | None:
    """The memories a chat injects (their texts changed in place) and the rolling summary (returned), with
    placeholders for secrets: files written before memvault withheld them, or edited by hand and not taken
    in yet, still hold them, and the model of another conversation is not shown them."""
    if not enabled(vault):
        return summary
    for result in results:
        result.text = stored_text(vault, result.text)
    return stored_text(vault, summary) if summary else summary


# -- learning ---------------------------------------------------------------------------------------

def stored_text(vault, text: str) -> str:
    """A text as the door stores it, secrets as placeholders: what fact extraction reads of the user's words
    (the model is never shown a secret by memvault; the chat's own request went upstream as the user sent
    it)."""
    return redact(text) if enabled(vault) and text else text


def stored_form(vault, text: str) -> tuple[str, list[str]]:
    """(a text as the door stores it, the values it withholds from it, in order): what `add` compares to find
    a duplicate. Two texts alike but for the secret withheld (a password changed: "the garage door password
    is X", then "... is Y") are not duplicates of each other."""
    if not enabled(vault) or not text:
        return text, []
    findings = scan(text)
    return redact(text, findings), [f.value for f in findings]


def withheld_values(vault, ids: Iterable[str]) -> dict[str, list[str]]:
    """{memory id: the values withheld from its text, in order} as .memvault/withheld.jsonl's latest record of
    each memory holds them (the record of the write that made the file as it is). A memory with no record
    is left out: the caller cannot tell what its placeholders stand for."""
    import json

    wanted = set(ids)
    found: dict[str, list[str]] = {}
    target = vault.sidecar / WITHHELD_FILE
    if not wanted or not target.is_file():
        return found
    try:
        with target.open(encoding="utf-8") as lines:
            for line in lines:
                if not any(memory_id in line for memory_id in wanted):
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("id") in wanted:
                    found[record["id"]] = [s.get("value", "") for s in record.get("secrets", ())
                                           if s.get("field", "text") == "text"]
    except OSError:
        return {}
    return found


def split_facts(vault, facts: list[str]) -> tuple[list[str], list[str]]:
    """(the facts to learn, the facts not learned because they hold a secret or a placeholder of one,
    as placeholders): a learned fact must not carry a key into every later prompt."""
    if not enabled(vault):
        return facts, []
    kept, dropped = [], []
    for fact in facts:
        if holds_secret(fact):
            dropped.append(redact(fact))
        else:
            kept.append(fact)
    return kept, dropped
