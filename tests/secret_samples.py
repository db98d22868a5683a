"""Fake secrets of every kind memvault withholds, in the sentences people paste them in, built at run time
from random parts (seeded): no string in this repository looks like a live provider key, so a git
host's push protection never trips on it. Used by tests/test_secrets.py and bench/secret_scan.py.

Also ordinary developer chat that is not a secret (commit ids, digests, UUIDs, URLs, paths, sentences
about passwords), for the false positives beyond LoCoMo's.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
UPPER_DIGITS = string.ascii_uppercase + string.digits


@dataclass(frozen=True)
class Sample:
    kind: str  # the kind memvault should name (its placeholder's word)
    text: str  # the sentence said
    value: str  # the secret in it, which must not survive


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _jwt(rng: random.Random) -> str:
    header = _b64url(json.dumps({"alg": rng.choice(["HS256", "RS256"]), "typ": "JWT"}).encode())
    payload = _b64url(json.dumps({"sub": _r(rng, HEX, 12), "name": rng.choice(["Ann", "Bo", "Chen"]),
                                  "iat": rng.randint(1_600_000_000, 1_800_000_000)}).encode())
    return f"{header}.{payload}.{_r(rng, URLSAFE, 43)}"


def _pem(rng: random.Random, label: str, lines: int = 6) -> str:
    body = "\n".join(_r(rng, B64, 64) for _ in range(lines))
    return f"-----BEGIN {label}-----\n{body}\n{_r(rng, B64, 20)}==\n-----END {label}-----"


# Prefixes split so that no line of this file is a provider's key pattern on its own.
SK, ANT, PROJ = "s" + "k-", "ant-" + "api03-", "pro" + "j-"
GHP, GHPAT, GLPAT = "gh" + "p_", "github" + "_pat_", "gl" + "pat-"
XOXB, XOXP = "xo" + "xb-", "xo" + "xp-"
STRIPE_LIVE, STRIPE_RK, STRIPE_TEST = "sk" + "_live_", "rk" + "_live_", "sk" + "_test_"
AIZA, HF, NPM, PYPI = "AI" + "za", "h" + "f_", "np" + "m_", "pypi-" + "AgEIcHlwaS5vcmc"
AKIA, OPENAI_MARK = "AK" + "IA", "T3Blbk" + "FJ"


def samples(seed: int = 31) -> list[Sample]:
    """At least four secrets of each of 22 kinds, each in a sentence of the kind people write."""
    rng = random.Random(seed)
    out: list[Sample] = []

    def add(kind: str, template: str, value: str) -> None:
        out.append(Sample(kind, template.format(v=value), value))

    for template in ("my openai key is {v}", "export OPENAI_API_KEY={v}", "use {v} for the billing bot",
                     "OPENAI_API_KEY=\"{v}\" python3 run.py"):
        add("openai-key", template, SK + _r(rng, ALNUM, 20) + OPENAI_MARK + _r(rng, ALNUM, 20))
    for template in ("here is the new project key: {v}", "the key is {v}.", "try {v}"):
        add("openai-key", template, SK + PROJ + _r(rng, URLSAFE, 74) + OPENAI_MARK + _r(rng, URLSAFE, 74))
    add("openai-key", "service key {v} (rotated monthly)", SK + PROJ + _r(rng, URLSAFE, 48))
    for template in ("Anthropic key: {v}", "set ANTHROPIC_API_KEY={v} before the run", "claude key {v}, keep it safe",
                     "curl -H 'x-api-key: {v}' https://api.example.com"):
        add("anthropic-key", template, SK + ANT + _r(rng, URLSAFE, 93) + "AA")
    for template in ("AWS access key id {v}", "aws_access_key_id = {v}", "the IAM user's key is {v}",
                     "AWS_ACCESS_KEY_ID={v} aws s3 ls"):
        add("aws-access-key", template, AKIA + _r(rng, UPPER_DIGITS, 16))
    for template in ("aws_secret_access_key = {v}", "AWS secret: \"{v}\"", "the aws secret key is '{v}'",
                     "AWS_SECRET_ACCESS_KEY={v}"):
        add("aws-secret-key", template, _r(rng, B64, 40))
    for template in ("my github token {v}", "GITHUB_TOKEN={v} gh pr list", "push with {v}"):
        add("github-token", template, GHP + _r(rng, ALNUM, 36))
    for template in ("fine-grained PAT: {v}", "new token {v} expires in 90 days"):
        add("github-token", template, GHPAT + _r(rng, ALNUM, 22) + "_" + _r(rng, ALNUM, 59))
    for template in ("gitlab token {v}", "CI_JOB_TOKEN is {v}", "use {v} to clone", "PRIVATE-TOKEN: {v}"):
        add("gitlab-token", template, GLPAT + _r(rng, URLSAFE, 20))
    for template in ("slack bot token {v}", "SLACK_BOT_TOKEN={v}", "user token: {v}"):
        prefix = rng.choice([XOXB, XOXP])
        add("slack-token", template, f"{prefix}{rng.randint(10**11, 10**12)}-{rng.randint(10**12, 10**13)}-"
                                      f"{_r(rng, string.ascii_lowercase + string.digits, 24)}")
    add("slack-webhook", "post alerts to {v}",
        f"https://hooks.slack.com/services/T{_r(rng, UPPER_DIGITS, 8)}/B{_r(rng, UPPER_DIGITS, 8)}/{_r(rng, ALNUM, 24)}")
    for template, prefix, n in (("stripe live key {v}", STRIPE_LIVE, 99), ("STRIPE_SECRET_KEY={v}", STRIPE_LIVE, 24),
                                ("restricted key: {v}", STRIPE_RK, 24), ("test with {v}", STRIPE_TEST, 24)):
        add("stripe-key", template, prefix + _r(rng, ALNUM, n))
    for template in ("google maps key {v}", "GOOGLE_API_KEY={v}", "the Gemini key is {v}", "key={v}&q=lisbon"):
        add("google-api-key", template, AIZA + _r(rng, URLSAFE, 35))
    for template in ("twilio api key {v}", "TWILIO_API_KEY={v}", "use {v} for SMS"):
        add("twilio-key", template, "SK" + _r(rng, HEX, 32))
    add("twilio-key", "twilio auth token is {v}", _r(rng, HEX, 32))
    for template in ("SENDGRID_API_KEY={v}", "sendgrid key {v}", "mail key: {v}", "{v} is the mailer's key"):
        add("sendgrid-key", template, "SG." + _r(rng, URLSAFE, 22) + "." + _r(rng, URLSAFE, 43))
    for template in ("npm token {v}", "NPM_TOKEN={v} npm publish", "publish with {v}",
                     "//registry.npmjs.org/:_authToken={v}"):
        add("npm-token", template, NPM + _r(rng, ALNUM, 36))
    for template in ("pypi token {v}", "TWINE_PASSWORD={v}", "upload token: {v}", "password = {v}"):
        add("pypi-token", template, PYPI + _r(rng, URLSAFE, 120))
    for template in ("hugging face token {v}", "HF_TOKEN={v}", "huggingface-cli login --token {v}", "my hf token is {v}"):
        add("huggingface-token", template, HF + _r(rng, string.ascii_letters, 34))
    for template in ("the session jwt: {v}", "Authorization: Bearer {v}", "token={v}", "here's my JWT {v}"):
        add("jwt", template, _jwt(rng))
    for label, template in (("RSA PRIVATE KEY", "my deploy key:\n{v}\nthanks"), ("OPENSSH PRIVATE KEY", "{v}"),
                            ("EC PRIVATE KEY", "here you go\n```\n{v}\n```"), ("PRIVATE KEY", "the cert key is\n{v}")):
        add("private-key", template, _pem(rng, label))
    for scheme, template in (("postgres", "DATABASE_URL=postgres://app:{v}@db.internal:5432/billing"),
                             ("mongodb+srv", "connect with mongodb+srv://admin:{v}@cluster0.ab12c.mongodb.net/test"),
                             ("https", "the mirror is https://deploy:{v}@git.example.org/repo.git"),
                             ("redis", "REDIS_URL=redis://default:{v}@cache.example.com:6379/0"),
                             ("amqp", "broker amqp://guest:{v}@rabbit:5672//")):
        add("url-password", template, _r(rng, ALNUM, 8) + rng.choice(["!", "", "9", "_x"]) + _r(rng, ALNUM, 4))
    for template, value in (("my password is {v}", "Tr0ub4dor&3"), ("pw: {v}", "hunter2!"),
                            ("the wifi password is '{v}'", "correct horse battery staple"),
                            ("login admin, password: {v}", "S3cure-" + _r(rng, ALNUM, 6)),
                            ("DB_PASSWORD={v}", _r(rng, ALNUM, 14)),
                            ("my bank PIN is {v}", str(rng.randint(1000, 9999)) + "x"),
                            ("the passphrase for the key is \"{v}\"", "blue moon over " + _r(rng, string.ascii_lowercase, 6))):
        add("password", template, value)
    for template in ("here's the token: {v}", "bearer {v}", "my api key is {v}", "{v} is the shared secret"):
        add("token", template, _r(rng, B64 + "-_", 40))
    for template in ("our datadog api key is {v}", "the heroku api token is {v}", "auth token {v}",
                     "API key for the weather service: {v}"):
        add("hex-token", template, _r(rng, HEX, 32))
    for template in ("webhook secret: {v}", "client_secret = {v}", "SESSION_SECRET={v}", "JWT_SECRET: {v}"):
        add("secret", template, _r(rng, URLSAFE, 18) + rng.choice(["!", "9", "_", "-x"]))
    for template in ("telegram bot token {v}", "BOT_TOKEN={v}", "bot {v} posts the reports"):
        add("telegram-token", template, f"{rng.randint(10**8, 10**9)}:AA{_r(rng, URLSAFE, 33)}")
    for template in ("DefaultEndpointsProtocol=https;AccountName=store1;AccountKey={v};EndpointSuffix=core.windows.net",
                     "AccountKey={v}", "azure: AccountKey={v}"):
        add("azure-storage-key", template, _r(rng, B64, 86) + "==")
    for template in ("mailchimp key {v}", "MAILCHIMP_KEY={v}", "list sync uses {v}"):
        add("mailchimp-key", template, _r(rng, HEX, 32) + "-us" + str(rng.randint(1, 20)))
    return out


def negatives(seed: int = 32) -> list[str]:
    """Developer chat that holds no secret: ids, digests, URLs, paths, versions, and talk about passwords
    and tokens that says none."""
    rng = random.Random(seed)
    sha = _r(rng, HEX, 40)
    texts = [
        f"the fix is in commit {sha}", f"git checkout {sha[:12]}", f"rebased onto {_r(rng, HEX, 40)} this morning",
        f"image digest sha256:{_r(rng, HEX, 64)}", f"the file's md5 is {_r(rng, HEX, 32)}",
        "request id 3f1c2a9e-7b4d-4e2a-9c1f-5d6e7f8a9b0c failed with 502",
        "see https://github.com/openai/openai-python/blob/main/src/openai/_client.py for the retry logic",
        "docs at https://docs.python.org/3/library/secrets.html#module-secrets",
        "https://www.youtube.com/watch?v=dQw4w9WgXcQ is the video",
        "the build is at /home/anne/projects/memvault/build/lib.linux-x86_64-cpython-311/memvault",
        "upgrade to numpy 2.1.3 and pyarrow 17.0.0", "color #1e90ff for the header, #ffcc00 for warnings",
        "I forgot my password again", "the password is on a sticky note under the keyboard",
        "reset your password at https://accounts.example.com/reset", "the token expires in 30 minutes",
        "my password is too short, it says", "use a password manager like Bitwarden",
        "the API key goes in the OPENAI_API_KEY environment variable", "key lime pie is my favourite dessert",
        "the secret to good bread is time", "password: see 1Password, entry 'prod db'",
        "set the password with `passwd` and then log out", "pip install detect-secrets==1.5.0",
        "ssh-keygen -t ed25519 -C anne@example.com", "the public key starts with ssh-ed25519 AAAAC3NzaC1lZDI1NTE5",
        "run pytest -k test_secrets_are_withheld_in_every_face", "the function is get_access_token_from_refresh_token",
        "ticket JIRA-48213 is blocked on PLAT-9921", "phone +1 415 555 0134, ext 2231",
        "export PATH=$HOME/.local/bin:$PATH", "DATABASE_URL=postgres://localhost:5432/billing",
        "password = os.environ['DB_PASSWORD']", "api_key = get_secret('stripe')", "token: ${GITHUB_TOKEN}",
        "the base64 of hello is aGVsbG8=", "ISBN 978-0-13-468599-1", "tracking number 1Z999AA10123456784",
        "the bucket is s3://acme-logs-eu-west-1/2024/05/", "flight LH1234 leaves at 07:45 from gate B12",
        # what an assistant's answer about keys says: examples, never a key
        "client = OpenAI(api_key=os.environ[\"OPENAI_API_KEY\"])", "export OPENAI_API_KEY=sk-...",
        "password = \"your-password-here\"", "DATABASE_URL=postgres://user:password@localhost:5432/app",
        "token: ${{ secrets.GITHUB_TOKEN }}", "curl -H \"Authorization: Bearer $TOKEN\" https://api.example.com",
        "api_key: YOUR_API_KEY", "SECRET_KEY = get_random_secret_key()", "the key looks like sk-proj-xxxx…",
        "set `PGPASSWORD` before running psql", "mysql -u root -p (it asks for the password)",
        # a keyword followed by prose words: this repository's own commit message was flagged
        "bench/secret_scan: held-out technical prose", "the api_key: read-only for now, as agreed",
    ]
    return texts


# -- passwords as people write them, and notes full of ids that are not secrets (issue 44) -------------

_WORDS = ("maple tree orange kite river stone purple monkey dishwasher correct horse battery staple coffee "
          "lantern violet tiger cactus rocket pepper marble ocean falcon willow thunder copper garden "
          "silver banana winter summer autumn spring sunset harbor meadow").split()
_SYMBOLS = "!@#$%&*?_-."


def _password(rng: random.Random) -> str:
    """A password of one of the shapes people pick: a word with a number and a sign, words joined,
    leet, a keyboard run with digits, a random string from a manager."""
    shape = rng.randrange(7)
    word = rng.choice(_WORDS)
    if shape == 0:
        return word.capitalize() + str(rng.randint(1990, 2030)) + rng.choice("!#$?.")
    if shape == 1:
        return "-".join(rng.choice(_WORDS) for _ in range(2)) + "-" + str(rng.randint(10, 9999))
    if shape == 2:
        return word.capitalize() + rng.choice("_.") + rng.choice(_WORDS).capitalize() + "_" + str(rng.randint(1, 99))
    if shape == 3:
        leet = word.translate(str.maketrans("aeiost", "43105+"))
        return leet + rng.choice(_SYMBOLS) + str(rng.randint(1, 999))
    if shape == 4:
        return rng.choice(["qwerty", "asdf", "zxcv", "Qwerty", "1qaz2wsx"]) + str(rng.randint(100, 99999)) + rng.choice("!?*")
    if shape == 5:
        return _r(rng, ALNUM, rng.randint(10, 16)) + rng.choice(_SYMBOLS) + _r(rng, ALNUM, 2)
    return word + str(rng.randint(1, 99)) + rng.choice(_WORDS).upper()[:3]


def _passphrase(rng: random.Random) -> str:
    return " ".join(rng.sample(_WORDS, rng.randint(3, 5)))


# How people say a password: with a verb or without, a colon, on a command line, in another order,
# quoted or not, in another language. {v} is the value.
PROSE_PASSWORD_TEMPLATES = (
    "ssh into prod with password {v}", "Wifi password {v}", "wifi: {v}", "the router pw {v}",
    "my password is {v}", "the password is {v}", "password: {v}", "Password = {v}", "pw {v}", "pw: {v}",
    "pwd {v}", "the new password is {v} (changed it today)", "wifi pw is {v}", "guest wifi: {v}",
    "login for the NAS: admin / password {v}", "the garage door password is {v}",
    "changed the netflix password to {v}", "new password for the bank: {v}", "password for grafana is {v}",
    "office wifi password {v}", "the alarm code is {v}", "gate code: {v}", "door code {v}",
    "{v} is the wifi password", "{v} is my new password", "use {v} as the password",
    "the password for the shared drive is \"{v}\"", "password is '{v}' for now", "root password {v}",
    "admin password: {v}", "db password {v}", "the vpn password is {v}", "password {v} for the staging box",
    "set the password to {v}", "temp password {v}, change it at first login", "his email password is {v}",
    "mom's ipad passcode is {v}", "laptop login pw: {v}", "printer admin pw = {v}", "router admin password {v}",
    "Passwort: {v}", "das WLAN-Passwort ist {v}", "mot de passe : {v}", "la contraseña es {v}", "senha: {v}",
    "user: anne, pass: {v}", "creds are admin/{v}", "login admin:{v} on the old box",
    "mysql -u root -p{v} billing", "mysqldump -uroot -p{v} shop > shop.sql", "psql with --password={v}",
    "sshpass -p {v} ssh pi@192.168.1.20", "redis-cli -a {v} ping",
    "the pin for the card is {v}", "my PIN: {v}", "safe combination {v}", "locker combo is {v}",
)
PASSPHRASE_TEMPLATES = (
    "my passphrase is {v}", "the passphrase is {v}", "passphrase: {v}", "the wifi password is {v}",
    "the key's passphrase is \"{v}\"", "backup passphrase {v}", "my password is {v}",
)


def prose_passwords(seed: int = 44) -> list[Sample]:
    """Passwords as people write them (issue 44): the issue's six phrasings, then every template with a
    password of a shape people pick, and passphrases of words; ~130 in all, each withheld whole."""
    rng = random.Random(seed)
    out = [Sample("password", text, value) for text, value in (
        ("ssh into prod with password Summer2026!", "Summer2026!"),
        ("my passphrase is correct horse battery staple", "correct horse battery staple"),
        ("Wifi password hunter2-blue-42", "hunter2-blue-42"), ("wifi: hunter2-blue-42", "hunter2-blue-42"),
        ("mysql -u root -pS3cr3tRootPw db", "S3cr3tRootPw"), ("the router pw MoonPie_77", "MoonPie_77"))]
    for template in PROSE_PASSWORD_TEMPLATES:
        if "code" in template or "pin" in template.lower() or "combo" in template or "combination" in template:
            value = rng.choice([str(rng.randint(1000, 999999)), f"{rng.randint(10, 99)}-{rng.randint(10, 99)}-"
                                f"{rng.randint(10, 99)}", str(rng.randint(1000, 9999)) + "#"])
        else:
            value = _password(rng)
        out.append(Sample("password", template.format(v=value), value))
    for template in PROSE_PASSWORD_TEMPLATES[:40]:  # a second value of another shape for the common phrasings
        if "code" not in template:
            value = _password(rng)
            out.append(Sample("password", template.format(v=value), value))
    for template in PASSPHRASE_TEMPLATES:
        value = _passphrase(rng)
        out.append(Sample("password", template.format(v=value), value))
    # a password of letters alone, said with a verb or a colon: the word itself is all there is to go by
    for text, value in (("my password is sunshine", "sunshine"), ("the wifi password is pineapple", "pineapple"),
                        ("password: letmein", "letmein"), ("the netflix password was dragonfly", "dragonfly")):
        out.append(Sample("password", text, value))
    return out


CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def innocent_notes(seed: int = 45) -> list[str]:
    """Notes full of ids, hashes, digests, versions and numbers that are not secrets (issue 44: 5 of 46
    such notes were withheld): what a developer or anyone keeps in a notes app. ~150, built from random
    parts (seeded)."""
    rng = random.Random(seed)

    def hexs(n: int) -> str:
        return _r(rng, HEX, n)

    def uuid4() -> str:
        h = hexs(32)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{rng.choice('89ab')}{h[17:20]}-{h[20:]}"

    def ulid() -> str:
        return "01" + _r(rng, CROCKFORD, 24)

    def b64(n: int) -> str:
        return base64.b64encode(rng.randbytes(n)).decode()

    notes = [
        # commits, tags, builds
        f"the fix landed in commit {hexs(40)}", f"revert {hexs(7)} before the release", f"cherry-picked {hexs(12)} onto main",
        f"bisect says the first bad commit is {hexs(40)}", f"the commit hash: {hexs(40)}", f"merge base {hexs(40)}",
        f"tagged v2.14.3-rc.1+build.{hexs(7)}", f"build #{rng.randint(1000, 99999)} of pipeline {rng.randint(100, 999)} failed",
        f"git log -1 --format=%H prints {hexs(40)}", f"blob id {hexs(40)} in the pack", f"tree {hexs(40)} is empty",
        # request, trace and event ids
        f"request id req_{ulid()} returned 500", f"req_{ulid()} timed out after 30s",
        f"x-request-id: {uuid4()}", f"aws request id {uuid4()} throttled", f"trace id {hexs(32)} span {hexs(16)}",
        f"traceparent 00-{hexs(32)}-{hexs(16)}-01", f"Sentry event {hexs(32)} is the crash", f"api request id: {_r(rng, ALNUM, 32)}",
        f"x-amz-id-2: {b64(48)}", f"x-amz-cf-id: {_r(rng, URLSAFE, 56)}==", f"correlation id {uuid4()}",
        f"the job id is {ulid()}", f"run {rng.randint(10**9, 10**10)} of the nightly job", f"event evt_{_r(rng, ALNUM, 24)} came twice",
        f"the webhook delivery {uuid4()} was retried", f"ray id {hexs(16)}-FRA",
        # provider object ids that are not keys
        f"stripe charge ch_{_r(rng, ALNUM, 24)} refunded", f"customer cus_{_r(rng, ALNUM, 14)} upgraded",
        f"payment intent pi_{_r(rng, ALNUM, 24)} needs 3DS", f"invoice in_{_r(rng, ALNUM, 24)} is overdue",
        f"subscription sub_{_r(rng, ALNUM, 24)} renews monthly", f"price_{_r(rng, ALNUM, 24)} is the yearly plan",
        f"openai response chatcmpl-{_r(rng, ALNUM, 29)}", f"the uploaded file is file-{_r(rng, ALNUM, 24)}",
        f"assistant asst_{_r(rng, ALNUM, 24)} answers support", f"thread_{_r(rng, ALNUM, 24)} has the whole chat",
        f"tool call call_{_r(rng, ALNUM, 24)} failed", f"anthropic message msg_01{_r(rng, ALNUM, 22)}",
        f"tool use toolu_01{_r(rng, ALNUM, 22)} returned nothing", f"batch batch_{_r(rng, ALNUM, 24)} is done",
        f"the ec2 instance i-{hexs(17)} is stopped", f"vpc-{hexs(17)} peers with vpc-{hexs(17)}",
        f"security group sg-{hexs(17)}", f"ami-{hexs(17)} is the base image",
        f"arn:aws:lambda:eu-west-1:{rng.randint(10**11, 10**12)}:function:resize-images",
        f"the azure subscription is {uuid4()}", f"gcp project my-proj-{rng.randint(100000, 999999)}",
        f"pod web-{hexs(10)}-{_r(rng, string.ascii_lowercase + string.digits, 5)} keeps restarting",
        f"container {hexs(12)} exited with 137", f"the droplet id is {rng.randint(10**8, 10**9)}",
        # cache keys, etags, digests
        f"cache key {hexs(64)} was evicted", f"cache key: user:{hexs(32)}:profile", f"cache-key: build-{hexs(40)}",
        f"the cache key for that query is {hexs(32)}", f"cache key v2:{_b64url(rng.randbytes(18))}",
        f"the etag is \"{hexs(32)}\"", f"ETag: W/\"{hexs(16)}\"", f"sha256 {hexs(64)}", f"image digest sha256:{hexs(64)}",
        f"docker pull ghcr.io/acme/api@sha256:{hexs(64)}", f"md5 of the backup: {hexs(32)}", f"sha1sum {hexs(40)}  backup.tar",
        f"blake2b {hexs(64)}", f"npm integrity sha512-{b64(64)}", f"the lockfile hash {hexs(64)}",
        f"content hash {hexs(16)} in the bundle name main.{hexs(8)}.js", f"the font is cached as {hexs(20)}.woff2",
        f"s3 object key uploads/2024/05/{hexs(32)}.png", f"the object key is avatars/{uuid4()}.jpg",
        f"primary key {_r(rng, ALNUM, 22)}", f"partition key tenant#{hexs(12)}", f"sort key 2024-05-01T10:00:00Z#{hexs(8)}",
        f"idempotency key {uuid4()}", f"the dedupe key is {hexs(40)}", f"row key {_r(rng, ALNUM, 20)}",
        f"magnet:?xt=urn:btih:{hexs(40)}", f"the torrent's info hash {hexs(40)}",
        f"ssh key fingerprint SHA256:{_b64url(rng.randbytes(32))}", f"gpg key fingerprint {hexs(40).upper()}",
        f"the key id is {hexs(16).upper()}", f"public key ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{_r(rng, B64, 43)} anne@laptop",
        f"the salt in the test vector is {hexs(32)}", f"nonce {hexs(24)} used once", f"the seed was {rng.randint(10**9, 10**10)}",
        f"mongo object id {hexs(24)}", f"the document _id is {hexs(24)}", f"firebase uid {_r(rng, ALNUM, 28)}",
        f"the video id is {_r(rng, URLSAFE, 11)}", f"short link https://bit.ly/{_r(rng, ALNUM, 7)}",
        f"share link https://drive.example.com/file/d/{_r(rng, URLSAFE, 33)}/view",
        f"the ulid {ulid()} sorts by time", f"nanoid {_r(rng, URLSAFE, 21)} for the share link",
        f"session id {uuid4()} expired", f"device id {uuid4()}", f"the tenant id is {uuid4()}",
        # versions, numbers
        f"upgrade to numpy 2.1.{rng.randint(0, 9)} and pyarrow {rng.randint(10, 20)}.0.0", "python 3.12.4 on macOS 14.5 (23F79)",
        f"kernel 6.8.0-{rng.randint(10, 60)}-generic", f"chrome 126.0.{rng.randint(1000, 9999)}.{rng.randint(10, 200)}",
        f"the api is v{rng.randint(1, 4)}beta{rng.randint(1, 3)}", f"schema version {rng.randint(1, 40)} migrated",
        f"order #{rng.randint(10**7, 10**8)} shipped", f"invoice INV-2024-{rng.randint(1000, 9999)} paid",
        f"tracking number 1Z{_r(rng, UPPER_DIGITS, 16)}", f"the parcel is {_r(rng, string.ascii_uppercase, 2)}{rng.randint(10**8, 10**9)}DE",
        f"ticket JIRA-{rng.randint(1000, 99999)} is blocked", f"case {rng.randint(10**7, 10**8)} with support",
        f"flight LH{rng.randint(100, 9999)} booking ref {_r(rng, UPPER_DIGITS, 6)}", f"confirmation code {_r(rng, UPPER_DIGITS, 8)}",
        f"the serial number is {_r(rng, UPPER_DIGITS, 12)}", f"IMEI {rng.randint(10**14, 10**15)}",
        f"mac address {':'.join(hexs(2) for _ in range(6))}", f"ip 10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
        f"ipv6 2001:db8:{hexs(4)}:{hexs(4)}::{hexs(4)}", f"the IBAN is DE{rng.randint(10, 99)} {rng.randint(1000, 9999)} "
        f"{rng.randint(1000, 9999)} {rng.randint(1000, 9999)} {rng.randint(1000, 9999)} {rng.randint(10, 99)}",
        f"phone +1 415 555 {rng.randint(1000, 9999)}", f"my library card {rng.randint(10**10, 10**11)}",
        f"colour #{hexs(6)} for the header", f"the wallet address is 0x{hexs(40)}",
        f"bitcoin address bc1q{_r(rng, string.ascii_lowercase + string.digits, 38)}",
        f"the license plate is {_r(rng, string.ascii_uppercase, 2)}-{rng.randint(1000, 9999)}",
        f"locker number {rng.randint(100, 999)}, key tag {rng.randint(10, 99)}", f"room {rng.randint(100, 999)}, seat {rng.randint(1, 40)}C",
        # paths, urls, code
        f"the build is at /home/anne/work/api/build/{hexs(8)}/lib", f"logs in ~/.cache/acme/{uuid4()}/run.log",
        f"https://github.com/acme/api/commit/{hexs(40)}", f"https://github.com/acme/api/pull/{rng.randint(100, 9999)}/files",
        f"https://example.com/orders/{uuid4()}?tab=items", f"https://cdn.example.com/assets/{hexs(32)}/logo.svg",
        f"https://www.youtube.com/watch?v={_r(rng, URLSAFE, 11)}", f"gs://acme-exports/{rng.randint(2020, 2026)}/{hexs(16)}.parquet",
        f"the function is get_{rng.choice(['access', 'refresh'])}_token_from_cache", "export PATH=$HOME/.local/bin:$PATH",
        "key lime pie is my favourite dessert", "the key to good bread is time", "keys are in the blue bowl by the door",
        f"spare key under the {rng.choice(['mat', 'pot', 'stone'])}", "my api key is in 1Password under 'weather'",
        "token economy talk at 3pm", f"the token count was {rng.randint(1000, 9000)}", f"max_tokens={rng.randint(100, 4000)}",
        f"session key rotation every {rng.randint(2, 30)} days", "the secret ingredient is cardamom",
        f"data:image/png;base64,{b64(45)}", f"the base64 of the test payload is {b64(30)}",
        f"the build key is {_r(rng, ALNUM, 20)}", f"foreign key order_id -> orders.id, index idx_{hexs(8)}",
        f"the hash of the empty string is {hashlib_sha256(b'')}",
    ]
    return notes


def hashlib_sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def password_talk() -> list[str]:
    """Sentences about passwords, PINs and codes that hold none: the prose rules' own false positives."""
    return [
        "I forgot my password again", "the password is on a sticky note under the keyboard",
        "my password is too short, it says", "the password is the same as last year", "the password is easy to guess",
        "the wifi password is written on the back of the router", "my password is stored in 1Password",
        "the password is case sensitive", "password reset link expired", "password manager of choice: Bitwarden",
        "the password must have 12 characters", "password protected zip from the accountant",
        "the password field is hidden", "use a passphrase instead of a password", "password rotation every 90 days",
        "ask Tom for the wifi password", "the wifi password changed last week", "what's the wifi password?",
        "the password is required for sudo", "the password is in the vault", "the password is what you set yesterday",
        "password: see 1Password, entry 'prod db'", "password: ask Lena", "password: the usual one",
        "pw: same as the router", "wifi: fast today, 300 Mbit", "wifi: down again since 9am", "wifi: 5GHz band is better",
        "guest wifi is open, no password", "the door code changed, ask the landlord", "gate code is on the lease",
        "my PIN was blocked after three tries", "the PIN is four digits", "change the PIN at any ATM",
        "passcode required after restart", "passphrase length matters more than symbols",
        "the passphrase is long and hard to remember", "set the password with `passwd` and then log out",
        "mysql -u root -p (it asks for the password)", "psql asks for the password twice",
        "password = os.environ['DB_PASSWORD']", "password = \"your-password-here\"",
        "DATABASE_URL=postgres://user:password@localhost:5432/app", "set `PGPASSWORD` before running psql",
        "the password policy needs a number and a symbol", "passwords must be rotated quarterly",
        "the password for the shared drive is with Maria", "I typed the wrong password 3 times",
        "the password prompt hangs on the second login", "password 2FA enabled on all accounts",
        "the old password still works on the printer", "the password is changed, it works now",
        "pw reset done", "my password is not working", "the wifi password is correct, the router is broken",
        "his password was leaked in the 2019 breach", "the password expires on 2024-06-01",
        "pin 17 on the raspberry pi is ground", "pin the tab so it stays open",
        "the safe combination is with the office manager", "my passphrase is something I never write down",
    ]


def heldout_notes(seed: int = 99) -> list[str]:
    """Notes written after the rules above were tuned on innocent_notes (a check of how they carry over): first
    measured at 1 of 59 withheld (a Figma "file key"), which "file" before "key" now covers."""
    rng = random.Random(seed)

    def hexs(n: int) -> str:
        return _r(rng, HEX, n)

    upper = string.ascii_uppercase + string.digits
    return [
        f"deploy {hexs(7)} to staging, then prod", f"PR #{rng.randint(100, 9999)} merged as {hexs(40)}",
        f"the artifact checksum (sha256) is {hexs(64)}", f"Dockerfile FROM python:3.12-slim@sha256:{hexs(64)}",
        f"conversation id {hexs(8)}-{hexs(4)}-4{hexs(3)}-a{hexs(3)}-{hexs(12)}",
        f"user id 4{_r(rng, string.digits, 17)} on discord", f"slack channel C{_r(rng, upper, 10)}",
        f"the google doc is https://docs.google.com/document/d/{_r(rng, URLSAFE, 44)}/edit", f"notion page {hexs(32)}",
        f"spotify track 4{_r(rng, ALNUM, 21)}", f"apple order W{rng.randint(10**9, 10**10)}",
        f"amazon order 112-{rng.randint(10**6, 10**7)}-{rng.randint(10**6, 10**7)}",
        f"booking.com confirmation {rng.randint(10**9, 10**10)}, the PIN is on the email",
        f"the VIN is 1HGCM{_r(rng, upper, 12)}", f"passport number X{_r(rng, string.digits, 8)} expires 2031",
        f"the wifi network is called {_r(rng, string.ascii_uppercase, 4)}-5G", f"k8s secret name db-creds-{hexs(5)}",
        f"helm release api-{hexs(8)}", f"terraform state lock {hexs(8)}-{hexs(4)}-4{hexs(3)}-b{hexs(3)}-{hexs(12)}",
        f"cloudflare zone id {hexs(32)}", f"account id {hexs(32)} on cloudflare", f"datadog monitor {rng.randint(10**7, 10**8)}",
        f"pagerduty incident P{_r(rng, upper, 6)}", f"linear issue ENG-{rng.randint(100, 9999)}",
        f"figma file key {_r(rng, ALNUM, 22)}", f"the airtable base is app{_r(rng, ALNUM, 14)}",
        f"hubspot contact {rng.randint(10**8, 10**9)}", f"git stash@{{0}} is {hexs(7)}",
        f"the release branch is release/2024.{rng.randint(1, 12)}", f"cargo lock checksum = \"{hexs(64)}\"",
        f"pip hash --hash=sha256:{hexs(64)}", f"go.sum h1:{base64.b64encode(rng.randbytes(32)).decode()}",
        f"the yarn cache folder is .yarn/cache/lodash-npm-4.17.21-{hexs(10)}-{hexs(10)}.zip", f"webpack chunk {hexs(20)}",
        f"model checkpoint step_{rng.randint(1000, 99999)}_{hexs(8)}.pt",
        f"wandb run {_r(rng, string.ascii_lowercase + string.digits, 8)}",
        f"hugging face model revision {hexs(40)}", f"the dataset commit is {hexs(40)}", f"mlflow run id {hexs(32)}",
        "the key to the shed is on the hook", f"keycard 0x{hexs(8)}", f"my gym membership number is {rng.randint(10**7, 10**8)}",
        f"the parking permit is {_r(rng, string.ascii_uppercase, 3)}{rng.randint(1000, 9999)}",
        f"prescription RX{rng.randint(10**6, 10**7)}", f"dentist appointment ref {_r(rng, upper, 8)}",
        f"insurance policy {_r(rng, string.ascii_uppercase, 2)}-{rng.randint(10**7, 10**8)}",
        f"tax id {rng.randint(10, 99)}-{rng.randint(10**6, 10**7)}", f"the bike lock serial is {_r(rng, upper, 10)}",
        f"router model RT-AX{rng.randint(50, 99)}U firmware 3.0.0.4.{rng.randint(300, 400)}_{rng.randint(10000, 99999)}",
        f"emoji shortcode :{_r(rng, string.ascii_lowercase, 6)}_{_r(rng, string.ascii_lowercase, 4)}:",
        f"css class .btn-{hexs(6)}", f"the fix is in {hexs(8)}..{hexs(8)}", f"signed off by key {hexs(16).upper()}",
        f"the cache id is {_r(rng, ALNUM, 32)}", f"object {_r(rng, URLSAFE, 40)} in the bucket",
        f"the file hash {base64.b64encode(rng.randbytes(32)).decode()}",
        f"token count {rng.randint(100, 9999)} of {rng.randint(10000, 200000)}",
        f"my steam friend code is {rng.randint(10**8, 10**9)}",
        f"the meeting id is {rng.randint(100, 999)} {rng.randint(100, 999)} {rng.randint(1000, 9999)}",
    ]


def heldout_passwords() -> list[Sample]:
    """Passwords written after the rules were tuned on prose_passwords: first measured at 18 of 20 withheld
    ("password for the kids' ipad 2468", "the safe's code is 7734"), which the rules now cover."""
    return [Sample("password", text, value) for text, value in (
        ("our netflix login is family@example.com / Popcorn#2024", "Popcorn#2024"),
        ("Zoom passcode 839201", "839201"), ("the meeting passcode is 4xT9pQ", "4xT9pQ"),
        ("wifi name HOME-5G, password tulip-garden-88", "tulip-garden-88"),
        ("remember: pw for the NAS = Ringo&Star55", "Ringo&Star55"),
        ("I set my apple id password to Bluebird!1987", "Bluebird!1987"),
        ("the new laptop password: Gl4ssH0use", "Gl4ssH0use"), ("password for the kids' ipad 2468", "2468"),
        ("grandma's email password is rosegarden1950", "rosegarden1950"),
        ("psql -U postgres --password=PgAdm1n!", "PgAdm1n!"), ("mysql -uadmin -p'S3cret Pass' app", "S3cret Pass"),
        ("the safe's code is 7734", "7734"), ("garage keypad code: 1357", "1357"),
        ("my bank login: anne.k / Tulip$Tree88", "Tulip$Tree88"), ("hotspot password = mango-papaya-31", "mango-papaya-31"),
        ("passphrase for the ssh key: lemon tractor violin desert", "lemon tractor violin desert"),
        ("the vault master password is Xq7!mR2#pL9", "Xq7!mR2#pL9"), ("The WiFi password is BlueSky2023", "BlueSky2023"),
        ("PW: Kangaroo88", "Kangaroo88"), ("new pw Trombone-42 for the forum", "Trombone-42"))]
