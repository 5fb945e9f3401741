//! Passes in which nothing changed take the comparisons of the pass before (see
//! `src/reconcile/reuse.rs`), and give the status a full pass gives; every change of
//! what a comparison reads is seen all the same: a hand edit, a deletion, a new commit,
//! a sync or refresh request, a policy reload.

#![allow(clippy::unwrap_used)]

mod support;

use std::{sync::Arc, time::Duration};

use plumb::{
    compare::SyncStatus,
    health::HealthStatus,
    reconcile::{Context, Mode, PassReport},
    status::{REFRESH_ANNOTATION, SYNC_ANNOTATION, SyncResult},
};
use support::*;

const ENV: &str = "syncPolicy: {automated: true, prune: true, selfHeal: false, syncOptions: [CreateNamespace=true]}";

fn cm(name: &str, value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{value: \"{value}\"}}\n")
}

async fn pass(ctx: &Context, app: &str) -> PassReport {
    ctx.run_pass(app, Mode::Policy, None).await.unwrap()
}

/// Policy passes after `last` (the report of the pass before, if known) until one takes
/// the comparisons of the pass before; its status is the status of that pass.
async fn reused_pass(ctx: &Context, app: &str, last: Option<PassReport>) -> PassReport {
    let mut previous = last;
    // (a sync, its objects' events, then a pass in which nothing changed)
    for _ in 0..300 {
        let before = ctx.comparisons_reused();
        let r = pass(ctx, app).await;
        if ctx.comparisons_reused() > before {
            let before = previous.expect("the pass before");
            assert_eq!(r.status, before.status, "a reused pass gives the status of the pass before");
            return r;
        }
        previous = Some(r);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no pass took the comparisons of the pass before")
}

/// A context with watches (as `plumb serve` runs passes) over `app`'s policy, synced and
/// settled into passes that reuse comparisons.
async fn settled(app: &App) -> Arc<Context> {
    let ctx = context_for(&app.policy, &app.lab.tmp.path().join("watch-cache"), true).await;
    let r = reused_pass(&ctx, &app.name, None).await;
    assert_eq!((r.status.sync, r.status.health), (SyncStatus::Synced, HealthStatus::Healthy));
    ctx
}

/// An application of two ConfigMaps, `a` and `b`, in namespace `ns`, synced and settled.
async fn two_config_maps(status_ns: &str, name: &str, ns: &str) -> (App, Arc<Context>) {
    let files = [("a.yaml", cm("a", "1")), ("b.yaml", cm("b", "1"))];
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let app = App::new(status_ns, name, ns, ENV, &files).await;
    let ctx = settled(&app).await;
    (app, ctx)
}

/// Edits ConfigMap `a` of `ns` by hand, then runs passes of `app` until one sees it.
async fn hand_edit_seen(ctx: &Context, app: &str, ns: &str) -> PassReport {
    kubectl(&["-n", ns, "patch", "configmap", "a", "--type=merge", "-p", r#"{"data":{"value":"by hand"}}"#]);
    wait_for("the hand edit seen", Duration::from_secs(60), || async {
        let r = pass(ctx, app).await;
        (r.status.sync == SyncStatus::OutOfSync).then_some(r)
    })
    .await
}

fn resource<'a>(r: &'a PassReport, object: &str) -> &'a plumb::status::ResourceStatus {
    r.status.resources.iter().find(|s| s.object == object).unwrap_or_else(|| panic!("{object}: {:?}", r.status))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_edit_and_a_deletion_are_seen_after_reused_passes() {
    let ns = "ru-edit";
    let (app, ctx) = two_config_maps("plumb-ru-edit", "ru-edit", ns).await;

    let r = hand_edit_seen(&ctx, &app.name, ns).await;
    assert_eq!(resource(&r, &format!("ConfigMap/{ns}/a")).sync, SyncStatus::OutOfSync, "{:?}", r.status);
    assert_eq!(resource(&r, &format!("ConfigMap/{ns}/b")).sync, SyncStatus::Synced);

    // put back by a sync, then settled again
    let r = ctx.run_pass(&app.name, Mode::Manual { prune: true, approve: false }, None).await.unwrap();
    assert!(r.sync.is_some(), "{:?}", r.status);
    reused_pass(&ctx, &app.name, None).await;

    kubectl(&["-n", ns, "delete", "configmap", "b"]);
    let r = wait_for("the deletion seen", Duration::from_secs(60), || async {
        let r = pass(&ctx, &app.name).await;
        (r.status.sync == SyncStatus::OutOfSync).then_some(r)
    })
    .await;
    let b = resource(&r, &format!("ConfigMap/{ns}/b"));
    assert_eq!((b.sync, b.health), (SyncStatus::OutOfSync, HealthStatus::Missing), "{:?}", r.status);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_commit_and_requests_compare_again() {
    let (status_ns, ns) = ("plumb-ru-req", "ru-req");
    let app = App::new(status_ns, "ru-req", ns, ENV, &[("a.yaml", &cm("a", "1"))]).await;
    let ctx = settled(&app).await;
    let client = ctx.cluster.client().clone();

    // a new commit: the very next pass compares it, and syncs it
    app.lab.repo.write("app/a.yaml", &cm("a", "2")).unwrap();
    let head = app.lab.repo.commit("two").unwrap();
    let reused = ctx.comparisons_reused();
    let r = pass(&ctx, &app.name).await;
    assert_eq!(ctx.comparisons_reused(), reused, "a new commit is compared");
    assert_eq!(r.status.revision, head);
    assert!(r.sync.as_ref().is_some_and(|s| s.applied.len() + s.applied_omitted == 1), "{:?}", r.sync);
    reused_pass(&ctx, &app.name, None).await;

    // a sync request: a manual sync, compared anew
    plumb::leader::request(&client, status_ns, &app.name, SYNC_ANNOTATION)
        .await
        .unwrap()
        .expect("the application exists");
    let reused = ctx.comparisons_reused();
    let r = pass(&ctx, &app.name).await;
    assert_eq!(ctx.comparisons_reused(), reused, "a sync request is compared anew");
    assert!(r.sync.is_some(), "the request syncs: {:?}", r.status);
    reused_pass(&ctx, &app.name, None).await;

    // a refresh request: a pass that compares anew
    plumb::leader::request(&client, status_ns, &app.name, REFRESH_ANNOTATION)
        .await
        .unwrap()
        .expect("the application exists");
    let reused = ctx.comparisons_reused();
    let r = pass(&ctx, &app.name).await;
    assert_eq!(ctx.comparisons_reused(), reused, "a refresh request is compared anew");
    reused_pass(&ctx, &app.name, Some(r)).await;
}

/// The comparison after plumb's own apply of a change asks no dry-run: the object is
/// what that apply wrote (same body, same resourceVersion), which a dry-run would
/// answer unchanged. A hand edit after it is compared (with a dry-run) and seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_comparison_after_an_own_apply_asks_no_dry_run() {
    let ns = "ru-own";
    let (app, ctx) = two_config_maps("plumb-ru-own", "ru-own", ns).await;

    app.lab.repo.write("app/a.yaml", &cm("a", "2")).unwrap();
    app.lab.repo.commit("two").unwrap();
    let dry_runs = ctx.cluster.dry_runs();
    let r = pass(&ctx, &app.name).await;
    assert!(r.sync.as_ref().is_some_and(|s| s.applied.len() + s.applied_omitted == 1), "{:?}", r.sync);
    assert_eq!(ctx.cluster.dry_runs(), dry_runs + 1, "the changed object's dry-run, before its apply");
    // the passes after it, until one takes the comparisons of the pass before
    let r = reused_pass(&ctx, &app.name, None).await;
    assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status);
    assert_eq!(ctx.cluster.dry_runs(), dry_runs + 1, "no dry-run after plumb's own apply");

    let r = hand_edit_seen(&ctx, &app.name, ns).await;
    assert_eq!(resource(&r, &format!("ConfigMap/{ns}/a")).sync, SyncStatus::OutOfSync, "{:?}", r.status);
    assert_eq!(ctx.cluster.dry_runs(), dry_runs + 2, "the hand edit compared with a dry-run");
}

/// A context as a replica taking over the application (or a restarted process) has
/// it: watches, the installation's key, nothing remembered.
async fn taking_over(app: &App, key: &[u8]) -> Context {
    let config = plumb::config::load(&app.policy).unwrap();
    let cluster = plumb::cluster::Cluster::connect(Some(&control_plane().kubeconfig)).await.unwrap();
    let metrics = Arc::new(plumb::metrics::Metrics::default());
    Context::new(cluster, Arc::new(config), app.lab.tmp.path().join("taken"), metrics)
        .with_watches()
        .with_mask_key(plumb::compare::sensitive::MaskKey::new(key))
}

/// The seal the last pass left ([`plumb::compare::seal`]): a context that takes the
/// application over judges its unchanged objects Synced with no dry-run; an object
/// changed since, a seal changed by whoever may write the status, or another key
/// each get the dry-runs of a cold comparison (and the change is seen).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_trusts_the_last_seal_only_while_nothing_changed() {
    let (ns, key) = ("ru-seal", b"installation key".as_slice());
    let files = [("a.yaml", cm("a", "1")), ("b.yaml", cm("b", "1")), ("c.yaml", cm("c", "1"))];
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let app = App::new("plumb-ru-seal", "ru-seal", ns, ENV, &files).await;
    // the last owner: synced, then a pass that wrote nothing seals
    let owner = Arc::new(taking_over(&app, key).await);
    let r = reused_pass(&owner, &app.name, None).await;
    assert_eq!(r.status.sync, SyncStatus::Synced);
    let sealed = app.ctx.store.load(&app.name).await.unwrap().0.synced_seal;
    assert_eq!(sealed.len(), 64, "sealed: {sealed:?}");
    drop(owner);

    // a new owner: no dry-run, Synced, the same seal
    let next = taking_over(&app, key).await;
    let r = pass(&next, &app.name).await;
    assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Synced, true), "{:?}", r.status);
    assert_eq!(next.cluster.dry_runs(), 0, "no dry-run of unchanged objects");
    assert_eq!(app.ctx.store.load(&app.name).await.unwrap().0.synced_seal, sealed);
    drop(next);

    // another installation's key: a cold comparison (3 dry-runs)
    let other = taking_over(&app, b"another key").await;
    assert_eq!(pass(&other, &app.name).await.status.sync, SyncStatus::Synced);
    assert_eq!(other.cluster.dry_runs(), 3, "another key's seal is not this one");
    drop(other);

    // a seal written by hand: not trusted
    let (mut forged, history) = app.ctx.store.load(&app.name).await.unwrap();
    forged.synced_seal = "0".repeat(64);
    app.ctx.store.save(&forged, &history).await.unwrap();
    let next = taking_over(&app, key).await;
    assert_eq!(pass(&next, &app.name).await.status.sync, SyncStatus::Synced);
    assert_eq!(next.cluster.dry_runs(), 3, "a seal nobody made with the key holds nothing");
    drop(next);

    // sealed again, then an object edited by hand: the new owner compares and sees it
    let owner = Arc::new(taking_over(&app, key).await);
    reused_pass(&owner, &app.name, None).await;
    drop(owner);
    kubectl(&["-n", ns, "patch", "configmap", "a", "--type=merge", "-p", r#"{"data":{"value":"by hand"}}"#]);
    let next = taking_over(&app, key).await;
    let r = pass(&next, &app.name).await;
    assert!(next.cluster.dry_runs() >= 1, "the changed object is compared with a dry-run");
    assert_eq!(resource(&r, &format!("ConfigMap/{ns}/a")).sync, SyncStatus::OutOfSync, "{:?}", r.status);
}

/// A sync seals what it wrote, each object at the resourceVersion its apply answered:
/// the status carries the seal from the sync's own pass (the pass after it, which finds
/// its own writes in the watch, has nothing new to save), and a replica taking the
/// application over right after the sync judges it Synced with no dry-run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_seals_what_it_wrote() {
    let (ns, key) = ("ru-sync-seal", b"installation key".as_slice());
    let files = [("a.yaml", cm("a", "1")), ("b.yaml", cm("b", "1"))];
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let app = App::new("plumb-ru-sync-seal", "ru-sync-seal", ns, ENV, &files).await;
    let owner = taking_over(&app, key).await;
    app.lab.repo.write("app/a.yaml", &cm("a", "2")).unwrap();
    app.lab.repo.commit("two").unwrap();
    let r = pass(&owner, &app.name).await;
    assert!(r.sync.as_ref().is_some_and(|s| s.result == SyncResult::Succeeded), "{:?}", r.sync);
    let sealed = app.ctx.store.load(&app.name).await.unwrap().0.synced_seal;
    assert_eq!(sealed.len(), 64, "sealed by the sync's pass: {sealed:?}");
    drop(owner);

    let next = taking_over(&app, key).await;
    let r = pass(&next, &app.name).await;
    assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Synced, true), "{:?}", r.status);
    assert_eq!(next.cluster.dry_runs(), 0, "no dry-run of what the sync wrote, nor of the rest");
    assert_eq!(app.ctx.store.load(&app.name).await.unwrap().0.synced_seal, sealed, "the same seal");
}

/// A reloaded policy starts a new context (as `plumb serve` does), which takes nothing
/// from the passes of the old one: the new boundaries refuse the objects at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_reload_compares_under_the_new_policy() {
    let ns = "ru-pol";
    let app = App::new("plumb-ru-pol", "ru-pol", ns, ENV, &[("a.yaml", &cm("a", "1"))]).await;
    let old = settled(&app).await;

    let env = format!("    {ENV}\n    destinations: {{namespaces: [elsewhere]}}");
    let reloaded = app.lab.app_policy("plumb-ru-pol", &app.name, ns, &env);
    drop(old);
    let ctx = context_for(&reloaded, &app.lab.tmp.path().join("watch-cache"), true).await;
    let r = pass(&ctx, &app.name).await;
    assert_eq!(ctx.comparisons_reused(), 0);
    let a = resource(&r, &format!("ConfigMap/{ns}/a"));
    assert!(a.reason.contains("not among the destinations"), "{:?}", r.status);
}

/// In `plumb serve`, with an hour between polls, a live change is healed because the
/// watch triggers a pass: an object deleted by hand (no finalizer, so no update
/// precedes the deletion) is created again, and one whose `plumb.dev/app` label was
/// removed by hand (it leaves the watch's selector) gets it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_and_a_removed_label_trigger_a_pass_at_once() {
    let ns = "ru-heal";
    let env =
        "syncPolicy: {automated: true, selfHeal: true, syncOptions: [CreateNamespace=true]}\nreconcileInterval: 1h";
    let files = [("a.yaml", cm("a", "1")), ("b.yaml", cm("b", "1"))];
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let app = App::new("plumb-ru-heal", "ru-heal", ns, env, &files).await;
    let plumb = Plumb::start(&app.policy, &app.lab.tmp.path().join("serve-cache")).await;
    let uid = |name: &str| {
        control_plane()
            .kubectl(&["-n", ns, "get", "configmap", name, "-o", "jsonpath={.metadata.uid}"])
            .unwrap_or_default()
    };
    let first = wait_for("both synced", Duration::from_secs(60), || async {
        let st = plumb.status(&app.name).await?;
        (st.sync == SyncStatus::Synced && !uid("a").is_empty()).then(|| uid("a"))
    })
    .await;

    kubectl(&["-n", ns, "delete", "configmap", "a"]);
    wait_for("a created again", Duration::from_secs(30), || async {
        let now = uid("a");
        (!now.is_empty() && now != first).then_some(())
    })
    .await;

    kubectl(&["-n", ns, "label", "configmap", "b", "plumb.dev/app-"]);
    wait_for("b labelled again", Duration::from_secs(30), || async {
        let label = control_plane()
            .kubectl(&["-n", ns, "get", "configmap", "b", "-o", "jsonpath={.metadata.labels.plumb\\.dev/app}"])
            .unwrap_or_default();
        (label == app.name).then_some(())
    })
    .await;
    plumb.stop().await;
}

/// The watch cache holds the objects of the policy's applications only: objects that
/// another installation (or an application no longer in the policy) labelled are
/// neither cached nor watched, however many there are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_cache_holds_only_the_policy_s_applications() {
    let (ns, strangers) = ("ru-scope", "ru-scope-strangers");
    let app = App::new("plumb-ru-scope", "ru-scope", ns, ENV, &[("a.yaml", &cm("a", "1"))]).await;
    let _ = control_plane().kubectl(&["create", "namespace", strangers]);
    let labelled: String = (0..20)
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: s{i}, namespace: {strangers}, labels: {{plumb.dev/app: another-installation}}}}\ndata: {{k: v}}\n---\n"
            )
        })
        .collect();
    kubectl_apply(&labelled);
    let ctx = settled(&app).await;
    assert_eq!(ctx.cached_objects(), 1, "only the application's ConfigMap (a)");
}

/// The policy of applications `apps`, each reading `app/` of the lab's repository into
/// namespace `n`, and a render pool of it (no cluster).
fn render_pool(lab: &Lab, apps: &[&str]) -> (Arc<plumb::config::Config>, plumb::source::Pool) {
    let mut policy = format!(
        "settings: {{statusNamespace: plumb-renders}}\nrepositories:\n  - {{name: r, url: {}}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true}}\napplications:\n",
        lab.url
    );
    for app in apps {
        policy +=
            &format!("  - {{name: {app}, repository: r, revision: main, path: app, namespace: n, environment: e}}\n");
    }
    let config = Arc::new(plumb::config::load(&lab.policy("p.yaml", &policy)).unwrap());
    (config.clone(), plumb::source::Pool::new(lab.tmp.path().join("cache"), config))
}

/// A path of a commit read before is not read again: the next render of it finds the
/// render cache with the files' digest, and its snapshot comes without files. Another
/// application of the same path (its own render) misses the render cache: its files
/// are read then, and it renders the same objects.
#[tokio::test]
async fn a_commit_s_path_is_read_once_and_read_again_when_its_render_is_not_cached() {
    use plumb::source::{Desired, Since};
    let lab = Lab::new("heads");
    lab.repo.write("app/a.yaml", &cm("a", "1")).unwrap();
    lab.repo.write("app/b.yaml", &cm("b", "2")).unwrap();
    lab.repo.commit("two").unwrap();
    let (config, pool) = render_pool(&lab, &["one", "two"]);
    let repo = &config.repositories[0];
    let render = |app: &'static str| {
        let pool = &pool;
        async move {
            match pool.desired(app, repo, "main", "app", Since::at(std::time::Instant::now())).await {
                Desired::Rendered(snapshot, rendered, ran) => (snapshot, rendered, ran),
                other => panic!("{other:?}"),
            }
        }
    };
    let (first, r1, ran1) = render("one").await;
    assert!(ran1, "rendered");
    assert_eq!(first.files.len(), 2, "files read");
    let (second, r2, ran2) = render("one").await;
    assert!(!ran2 && Arc::ptr_eq(&r1, &r2), "the render cache answered");
    assert!(second.files.is_empty(), "no file read again");
    assert_eq!((&second.revision, &second.files_digest), (&first.revision, &first.files_digest));
    let (other, r3, ran3) = render("two").await;
    assert!(ran3, "another application's render is its own");
    assert!(other.files.is_empty(), "read for the render, not kept in the snapshot");
    let names = |r: &plumb::render::Rendered| {
        r.manifests.iter().map(|m| m.object()["metadata"]["name"].clone()).collect::<Vec<_>>()
    };
    assert_eq!(names(&r3), ["a", "b"]);
    assert_eq!(r3.manifests, r1.manifests);
}

/// Commits pushed to one application replace its cached renders: after three, the
/// first renders again (two are kept, `RENDERS_PER_APP`), the last two do not. What
/// the cache holds follows the current commits, not how many were pushed.
#[tokio::test]
async fn an_application_s_pushes_replace_its_cached_renders() {
    use plumb::source::{Desired, Since};
    let lab = Lab::new("renders");
    let mut commits = vec![];
    for n in 1..=3 {
        lab.repo.write("app/a.yaml", &cm("a", &n.to_string())).unwrap();
        commits.push(lab.repo.commit(&format!("c{n}")).unwrap());
    }
    let (config, pool) = render_pool(&lab, &["one"]);
    let repo = &config.repositories[0];
    let ran = async |revision: &str| match pool
        .desired("one", repo, revision, "app", Since::at(std::time::Instant::now()))
        .await
    {
        Desired::Rendered(_, _, ran) => ran,
        other => panic!("{other:?}"),
    };
    for c in &commits {
        assert!(ran(c).await, "{c} rendered");
    }
    assert!(!ran(&commits[2]).await && !ran(&commits[1]).await, "the last two are kept");
    assert!(ran(&commits[0]).await, "the first was dropped");
}

/// A resolve that asks the remote reads its advertisement once: a new commit costs that
/// advertisement and the negotiation of its pack (fetched in the same round), no
/// second advertisement; with nothing new, the advertisement alone. Counted at the Git
/// server (`git http-backend`'s requests).
#[test]
fn a_new_commit_costs_one_advertisement_and_its_pack() {
    let lab = Lab::new("adverts");
    lab.repo.write("app/a.yaml", &cm("a", "0")).unwrap();
    lab.repo.commit("c0").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mirror = plumb::source::Mirror::open(cache.path(), &lab.url, Default::default()).unwrap();
    let first = mirror.resolve("main").unwrap();
    assert!(first.downloaded, "the first commit is fetched");
    for i in 1..=3 {
        lab.repo.write("app/a.yaml", &cm("a", &i.to_string())).unwrap();
        let pushed = lab.repo.commit(&format!("c{i}")).unwrap();
        let before = lab.git.counts();
        let r = mirror.resolve("main").unwrap();
        let after = lab.git.counts();
        assert_eq!((r.revision.as_str(), r.downloaded), (pushed.as_str(), true));
        assert_eq!(after.0 - before.0, 1, "one advertisement for a new commit");
        assert!(after.1 > before.1, "its pack negotiated");

        let before = lab.git.counts();
        let again = mirror.resolve("main").unwrap();
        let after = lab.git.counts();
        assert_eq!((again.revision.as_str(), again.downloaded), (pushed.as_str(), false));
        assert_eq!((after.0 - before.0, after.1 - before.1), (1, 0), "nothing new: the advertisement alone");
    }
}
