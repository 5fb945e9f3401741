#!/usr/bin/env python3
"""Writes the pull request deliveries of this folder (same layout as
shared/webhook-vectors: body.json, headers.txt, expected.json), signed with secret.txt.
Payloads are trimmed to the fields the forges document and plumb reads, plus a few
it must ignore. Run it again after editing a payload: it rewrites all three files."""
import hashlib, hmac, json, pathlib

HERE = pathlib.Path(__file__).parent
SECRET = (HERE / "secret.txt").read_bytes()
HEAD = "6c7b091f75b5d420c243d39dea5c2f558e62c682"
BASE = "3782af66823ad40dc924010fded9916d9134eaf2"

def github_repo(full):
    return {"full_name": full, "clone_url": f"https://github.example.invalid/{full}.git",
            "ssh_url": f"git@github.example.invalid:{full}.git", "git_url": f"git://github.example.invalid/{full}.git",
            "html_url": f"https://github.example.invalid/{full}"}

def github(action, head_repo, number=42):
    return {"action": action, "number": number,
            "pull_request": {"number": number, "state": "open", "title": "web: bump image", "merged": action == "closed",
                             "labels": [{"name": "preview"}],
                             "head": {"ref": "bump", "sha": HEAD, "repo": head_repo},
                             "base": {"ref": "main", "sha": BASE, "repo": github_repo("acme/platform-config")}},
            "repository": github_repo("acme/platform-config"), "sender": {"login": "dev1"}}

def gitlab(action, oldrev, source_project=7):
    attrs = {"iid": 12, "action": action, "state": "opened", "target_branch": "main", "source_branch": "bump",
             "source_project_id": source_project, "target_project_id": 7, "last_commit": {"id": HEAD}}
    if oldrev:
        attrs["oldrev"] = BASE
    return {"object_kind": "merge_request", "event_type": "merge_request", "user": {"username": "dev1"},
            "project": {"id": 7, "path_with_namespace": "acme/platform-config",
                        "git_http_url": "https://gitlab.example.invalid/acme/platform-config.git",
                        "git_ssh_url": "git@gitlab.example.invalid:acme/platform-config.git",
                        "web_url": "https://gitlab.example.invalid/acme/platform-config"},
            "object_attributes": attrs, "labels": [{"title": "preview"}]}

def gitea(action, head_repo_id=3):
    repo = {"full_name": "acme/platform-config", "clone_url": "https://gitea.example.invalid/acme/platform-config.git",
            "ssh_url": "git@gitea.example.invalid:acme/platform-config.git",
            "html_url": "https://gitea.example.invalid/acme/platform-config"}
    return {"action": action, "number": 5,
            "pull_request": {"number": 5, "merged": False, "labels": [],
                             "head": {"ref": "bump", "sha": HEAD, "repo_id": head_repo_id},
                             "base": {"ref": "main", "sha": BASE, "repo_id": 3}},
            "repository": repo, "sender": {"login": "dev1"}}

def sign_github(body, event, delivery):
    mac = hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    return [("Content-Type", "application/json"), ("User-Agent", "GitHub-Hookshot/5f3e1a9"),
            ("X-GitHub-Delivery", delivery), ("X-GitHub-Event", event), ("X-Hub-Signature-256", f"sha256={mac}")]

def sign_gitea(body, event_type, delivery):
    mac = hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    return [("Content-Type", "application/json"), ("X-Gitea-Delivery", delivery), ("X-Gitea-Event", "pull_request"),
            ("X-Gitea-Event-Type", event_type), ("X-Gitea-Signature", mac)]

def sign_gitlab(body, delivery):
    return [("Content-Type", "application/json"), ("Idempotency-Key", delivery),
            ("X-Gitlab-Event", "Merge Request Hook"), ("X-Gitlab-Token", SECRET.decode())]

VECTORS = {
    "github-pull-request-opened": (github("opened", github_repo("acme/platform-config")), "github",
        lambda b: sign_github(b, "pull_request", "0b7f6e2a-1111-4c6e-9a55-6f5a1e1c0001"),
        {"action": "preview", "http_status": 202, "pull_number": 42, "pull_action": "opened", "pull_head": HEAD,
         "pull_head_ref": "refs/pull/42/head", "pull_base": "main", "pull_fork": False,
         "apps": ["git@github.example.invalid:acme/platform-config.git+refs/heads/main"]},
        "GitHub pull request opened from a branch of the same repository into main: previewed."),
    "github-pull-request-fork": (github("synchronize", github_repo("mallory/platform-config")), "github",
        lambda b: sign_github(b, "pull_request", "0b7f6e2a-1111-4c6e-9a55-6f5a1e1c0002"),
        {"action": "preview", "http_status": 202, "pull_action": "synchronized", "pull_fork": True},
        "GitHub pull request from a fork, new commits: queued; whether a fork is previewed is the environment's (previews.forks)."),
    "github-pull-request-closed": (github("closed", github_repo("acme/platform-config")), "github",
        lambda b: sign_github(b, "pull_request", "0b7f6e2a-1111-4c6e-9a55-6f5a1e1c0003"),
        {"action": "ignore", "http_status": 200, "pull_action": "closed", "apps": []},
        "GitHub pull request merged: nothing to preview, acknowledged."),
    "gitlab-merge-request-update": (gitlab("update", True), "gitlab",
        lambda b: sign_gitlab(b, "5c1d2e3f-2222-4c6e-9a55-6f5a1e1c0004"),
        {"action": "preview", "http_status": 202, "pull_number": 12, "pull_action": "synchronized",
         "pull_head_ref": "refs/merge-requests/12/head", "pull_fork": False,
         "apps": ["https://gitlab.example.invalid/acme/platform-config/+refs/heads/main"]},
        "GitLab merge request updated with new commits (oldrev present): previewed."),
    "gitlab-merge-request-title-edit": (gitlab("update", False), "gitlab",
        lambda b: sign_gitlab(b, "5c1d2e3f-2222-4c6e-9a55-6f5a1e1c0005"),
        {"action": "ignore", "http_status": 200, "pull_action": "other"},
        "GitLab merge request update without oldrev (a title or label change): nothing to preview."),
    "gitea-pull-request-synchronized": (gitea("synchronized"), "gitea",
        lambda b: sign_gitea(b, "pull_request_sync", "7d8e9f00-3333-4c6e-9a55-6f5a1e1c0006"),
        {"action": "preview", "http_status": 202, "pull_number": 5, "pull_action": "synchronized",
         "pull_head_ref": "refs/pull/5/head", "pull_fork": False,
         "apps": ["https://gitea.example.invalid/acme/platform-config.git+refs/heads/main"]},
        "Gitea pull request pushed to (X-Gitea-Event-Type pull_request_sync): previewed."),
    "neg-github-pull-request-bad-signature": (github("opened", github_repo("acme/platform-config")), "github",
        lambda b: sign_github(b + b" ", "pull_request", "0b7f6e2a-1111-4c6e-9a55-6f5a1e1c0007"),
        {"action": "reject", "http_status": 401},
        "GitHub pull request whose signature covers other bytes: refused before parsing."),
}

for name, (payload, provider, sign, expected, description) in VECTORS.items():
    d = HERE / name
    d.mkdir(exist_ok=True)
    body = json.dumps(payload, indent=2).encode() + b"\n"
    (d / "body.json").write_bytes(body)
    headers = sign(body)
    (d / "headers.txt").write_text("".join(f"{k}: {v}\n" for k, v in headers))
    out = {"id": name, "description": description, "provider": provider,
           "request": {"body_file": "body.json", "body_bytes": len(body)}, **expected}
    (d / "expected.json").write_text(json.dumps(out, indent=1) + "\n")
