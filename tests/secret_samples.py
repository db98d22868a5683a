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
