//! Benchmark: a large vendored Helm chart (the lab's cert-manager-like chart of
//! `lab/tests/data/certs` with 400 more ConfigMaps from one ranged template), rendered
//! by plumb cold (a new pool: `helm version`, a working copy, `helm template` — twice,
//! as the chart generates its webhook CA) and cached (an unchanged tree: no child
//! process), side by side with `helm template` of the same chart run by hand.
//!
//! Run: `cargo bench -p plumb-lab --bench render_helm` (needs `tools/testbins/build.sh
//! helm`; `PASSES=10` to change the count). No cluster is needed.
#![allow(clippy::unwrap_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::{
    path::Path,
    process::Command,
    sync::Arc,
    time::{Duration, Instant},
};

use plumb::{
    config::load,
    source::{Desired, Pool, Since},
};
use support::*;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn copy_tree(lab: &Lab, from: &Path, to: &str) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = format!("{to}/{}", e.file_name().into_string().unwrap());
        if e.file_type().unwrap().is_dir() {
            copy_tree(lab, &e.path(), &dest);
        } else {
            lab.repo.write(&dest, &std::fs::read_to_string(e.path()).unwrap()).unwrap();
        }
    }
}

const MANY: &str = r#"{{- range $i := until (int .Values.extra) }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "certs.fullname" $ }}-extra-{{ $i }}
  labels:
    {{- include "certs.labels" $ | nindent 4 }}
data:
  index: {{ $i | quote }}
  config.yaml: |
    issuer: {{ $.Values.issuer.name }}
    port: {{ $.Values.webhook.port }}
{{- end }}
"#;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let passes: usize = std::env::var("PASSES").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let helm = plumb_lab::testbins_dir().join("helm/current/bin/helm");
    assert!(helm.is_file(), "run tools/testbins/build.sh helm");
    let lab = Lab::new("bench-helm");
    copy_tree(&lab, &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/certs"), "charts/certs");
    lab.repo.write("charts/certs/templates/many.yaml", MANY).unwrap();
    lab.repo.write("envs/bench.yaml", "extra: 400\n").unwrap();
    lab.repo.commit("certs + 400 ConfigMaps").unwrap();
    let policy = lab.policy(
        "p.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-bench, renderTools: {{helm: {}}}}}\nrepositories:\n  - {{name: r, url: {}}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: false}}\napplications:\n  - {{name: certs, repository: r, revision: main, path: charts/certs, namespace: certs, environment: e, source: {{type: helm, releaseName: certs, valueFiles: [envs/bench.yaml]}}}}\n",
            helm.display(),
            lab.url
        ),
    );
    let config = Arc::new(load(&policy).unwrap());
    let repo = &config.repositories[0];
    let (mut cold, mut cached) = (Vec::new(), Vec::new());
    let mut objects = 0;
    for i in 0..passes {
        let pool = Pool::new(lab.tmp.path().join(format!("cache-{i}")), config.clone());
        let Desired::Rendered(_, r, _) =
            pool.desired("certs", repo, "main", "charts/certs", Since::at(Instant::now())).await
        else {
            panic!("render")
        };
        objects = r.manifests.len();
        cold.push(ms(r.took));
        let t = Instant::now();
        let Desired::Rendered(..) =
            pool.desired("certs", repo, "main", "charts/certs", Since::at(Instant::now())).await
        else {
            panic!("render")
        };
        cached.push(ms(t.elapsed()));
        assert_eq!(pool.tool_runs(), 3, "version, two templates; the cached call starts nothing");
    }
    let mut by_hand: Vec<f64> = (0..passes)
        .map(|_| {
            let t = Instant::now();
            let out = Command::new(&helm)
                .args(["template", "certs", "charts/certs", "--namespace", "certs", "--include-crds"])
                .args(["--values", "envs/bench.yaml"])
                .current_dir(&lab.repo.work)
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            ms(t.elapsed())
        })
        .collect();
    println!("helm chart `certs` + 400 ConfigMaps: {objects} objects ({passes} runs each):");
    println!("plumb  cold render (helm template x2: the chart generates a CA)  median {:>8.1} ms", median(&mut cold));
    println!("plumb  cached render (unchanged tree), 0 child processes        median {:>8.1} ms", median(&mut cached));
    println!("helm   template --include-crds (by hand, once)                 median {:>8.1} ms", median(&mut by_hand));
}
