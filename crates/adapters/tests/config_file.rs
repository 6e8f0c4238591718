//! `orchestrator.toml` parsing, discovery, environment overrides and the
//! `--agent` flag.

// Helpers outside #[test] functions unwrap too: this file is all test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::path::Path;
use std::time::Duration;

use orchestrator_adapters::config::{
    AgentKind, AgentSpec, CommandLine, CommandValue, Config, ConfigError, Schedule, TestsSection,
    join_command, split_command,
};
use orchestrator_adapters::openai::OpenAiConfig;
use proptest::prelude::*;

const EXAMPLE: &str = include_str!("../orchestrator.example.toml");

fn example_path() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/orchestrator.example.toml"
    ))
}

/// Parses `text`, expecting an error; returns its message.
fn error(text: &str) -> String {
    match Config::parse_str(text) {
        Ok(config) => panic!("expected an error for {text:?}, got {config:?}"),
        Err(e) => e.to_string(),
    }
}

fn argv(words: &[&str]) -> CommandLine {
    CommandLine::Argv(words.iter().map(|w| (*w).to_owned()).collect())
}

#[test]
fn the_example_file_parses_into_every_section() {
    let config = Config::load(example_path()).unwrap();
    insta::assert_json_snapshot!("example_config", config);
    assert_eq!(config.agent_spec().unwrap(), AgentSpec::OpenAi);
    assert_eq!(
        config.tests.as_ref().unwrap().command_line().unwrap(),
        argv(&["cargo", "test", "--workspace"])
    );
    assert_eq!(
        config
            .agent
            .command
            .as_ref()
            .unwrap()
            .command_line()
            .unwrap(),
        argv(&["my-agent", "--json"])
    );
    assert_eq!(config.planex.schedule, Some(Schedule::Eager));
    assert_eq!(config.review_fix.batch_size, NonZeroUsize::new(5));
}

#[test]
fn the_example_openai_section_builds_agent_settings() {
    let config = Config::parse_str(EXAMPLE).unwrap();
    let openai = OpenAiConfig::from_section(config.agent.openai.as_ref().unwrap()).unwrap();
    assert_eq!(openai.base_url, "http://127.0.0.1:11434/v1");
    assert_eq!(openai.model, "qwen2.5-coder:14b");
    assert_eq!(openai.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    assert_eq!(openai.request_timeout, Duration::from_secs(600));
    assert_eq!(openai.max_retries, 3);
    assert_eq!(openai.temperature, Some(0.2));
    assert_eq!(openai.max_tokens, Some(4096));
    assert_eq!(openai.system_prompt, None);
}

#[test]
fn a_minimal_file_takes_the_defaults() {
    let config = Config::parse_str("version = 1\n").unwrap();
    assert_eq!(config, Config::default());
    assert_eq!(config.agent.kind, AgentKind::Builtin);
    assert_eq!(config.agent_spec().unwrap(), AgentSpec::Builtin);
}

#[test]
fn parse_errors_name_the_key_value_and_line() {
    let cases = [
        ("unknown top-level key", "version = 1\nverbose = true\n"),
        (
            "unknown key in a section",
            "version = 1\n[agent]\nkind = \"openai\"\n[agent.openai]\nmodle = \"llama3\"\n",
        ),
        ("bad agent kind", "version = 1\n[agent]\nkind = \"gpt\"\n"),
        ("missing version", "[agent]\nkind = \"claude\"\n"),
        ("future version", "version = 2\n"),
        (
            "zero batch size",
            "version = 1\n[review_fix]\nbatch_size = 0\n",
        ),
        (
            "wrong type",
            "version = 1\n[planex]\nconcurrency = \"four\"\n",
        ),
        (
            "bad schedule",
            "version = 1\n[planex]\nschedule = \"fast\"\n",
        ),
        (
            "command of the wrong type",
            "version = 1\n[tests]\ncommand = 42\n",
        ),
        ("not toml at all", "version = = 1\n"),
    ];
    let report: Vec<String> = cases
        .iter()
        .map(|(what, text)| format!("{what}:\n  {}", error(text)))
        .collect();
    insta::assert_snapshot!("parse_errors", report.join("\n"));
}

#[test]
fn unknown_keys_are_reported_with_the_key_and_its_line() {
    let text = "version = 1\n\n[tests]\ncommand = [\"make\", \"test\"]\ntimeout = 5\n";
    match Config::parse_str(text) {
        Err(ConfigError::Parse {
            line,
            column,
            message,
            ..
        }) => {
            assert_eq!((line, column), (Some(5), Some(1)));
            assert!(message.contains("unknown field `timeout`"), "{message}");
            assert!(message.contains("timeout_secs"), "{message}");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn a_bad_kind_lists_the_valid_ones() {
    let message = error("version = 1\n[agent]\nkind = \"chatgpt\"\n");
    for kind in AgentKind::ALL {
        assert!(message.contains(&format!("`{kind}`")), "{message}");
    }
}

#[test]
fn command_errors_are_checked_at_load() {
    let check = |text: &str, expected: &str| {
        let message = error(&format!("version = 1\n{text}"));
        assert!(message.contains(expected), "{message}");
    };
    check(
        "[tests]\ncommand = \"cargo test | tee log\"\n",
        "invalid command in [tests] command: unquoted '|' at character 12 needs a shell",
    );
    check("[tests]\ncommand = []\n", "the argv array is empty");
    check(
        "[tests]\ncommand = [\"make\"]\nshell = true\n",
        "shell = true needs a string command",
    );
    check(
        "[agent]\nkind = \"command\"\n",
        "agent kind `command` needs an [agent.command] section with argv",
    );
    check(
        "[agent]\nkind = \"command\"\n[agent.command]\ninput = \"stdin\"\n",
        "[agent.command] argv: missing",
    );
}

#[test]
fn test_commands_come_as_argv_words_or_shell_script() {
    let tests = |text: &str| {
        Config::parse_str(&format!("version = 1\n[tests]\n{text}"))
            .unwrap()
            .tests
            .unwrap()
    };
    let split = tests("command = \"cargo test -- --test-threads '1'\"\ntimeout_secs = 60\n");
    assert_eq!(
        split.command_line().unwrap(),
        argv(&["cargo", "test", "--", "--test-threads", "1"])
    );
    assert_eq!(split.timeout(), Some(Duration::from_secs(60)));
    let shell = tests("command = \"make test 2>&1 | tail -5\"\nshell = true\n");
    assert_eq!(
        shell.command_line().unwrap(),
        CommandLine::Shell("make test 2>&1 | tail -5".into())
    );
    assert_eq!(
        TestsSection::argv(vec!["pytest".into()])
            .command_line()
            .unwrap(),
        argv(&["pytest"])
    );
}

#[test]
fn discover_finds_the_file_in_the_repo_root_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(Config::discover(dir.path()).unwrap(), None);
    std::fs::write(
        dir.path().join("orchestrator.toml"),
        "version = 1\n[agent]\nkind = \"codex\"\n",
    )
    .unwrap();
    let config = Config::discover(dir.path()).unwrap().unwrap();
    assert_eq!(config.agent.kind, AgentKind::Codex);

    std::fs::write(dir.path().join("orchestrator.toml"), "version = 1\nx = 1\n").unwrap();
    let message = Config::discover(dir.path()).unwrap_err().to_string();
    assert!(
        message.starts_with(&format!(
            "failed to parse config file {}/orchestrator.toml at line 2, column 1:",
            dir.path().display()
        )),
        "{message}"
    );
}

#[test]
fn loading_a_missing_file_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.toml");
    let message = Config::load(&path).unwrap_err().to_string();
    assert!(
        message.starts_with(&format!("failed to read config file {}:", path.display())),
        "{message}"
    );
}

#[test]
fn environment_overrides_the_file() {
    let mut config = Config::parse_str(
        "version = 1\n[agent]\nkind = \"claude\"\n[agent.openai]\nmodel = \"a\"\n",
    )
    .unwrap();
    let env: HashMap<&str, &str> = HashMap::from([
        ("ORCHESTRATOR_AGENT", "openai"),
        ("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1"),
        ("OPENAI_MODEL", "b"),
        ("UNRELATED", "x"),
    ]);
    config
        .apply_env_from(|var| env.get(var).map(|v| (*v).to_owned()))
        .unwrap();
    assert_eq!(config.agent.kind, AgentKind::Openai);
    let openai = config.agent.openai.as_ref().unwrap();
    assert_eq!(openai.base_url.as_deref(), Some("http://127.0.0.1:8000/v1"));
    assert_eq!(openai.model.as_deref(), Some("b"));

    // Empty variables change nothing; a bad agent names the variable.
    let before = config.clone();
    config
        .apply_env_from(|var| (var == "OPENAI_MODEL").then(String::new))
        .unwrap();
    assert_eq!(config, before);
    let err = config
        .apply_env_from(|var| (var == "ORCHESTRATOR_AGENT").then(|| "gpt".to_owned()))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid environment variable ORCHESTRATOR_AGENT: invalid agent \"gpt\": unknown agent \
         `gpt`; expected one of builtin, claude, codex, gemini, openai, openai:<model>, command:<cmd>"
    );
}

#[test]
fn an_agent_spec_overrides_kind_and_command() {
    let mut config = Config::parse_str(EXAMPLE).unwrap();
    let spec = AgentSpec::parse("command:./bin/agent --mode 'fix it'").unwrap();
    config.apply_agent_spec(&spec);
    assert_eq!(config.agent.kind, AgentKind::Command);
    assert_eq!(config.agent_spec().unwrap(), spec);
    let section = config.agent.command.as_ref().unwrap();
    assert_eq!(
        section.argv,
        Some(CommandValue::Argv(vec![
            "./bin/agent".into(),
            "--mode".into(),
            "fix it".into()
        ]))
    );
    // The section's other settings stay.
    assert_eq!(section.timeout(), Some(Duration::from_secs(600)));

    config.apply_agent_spec(&AgentSpec::Gemini);
    assert_eq!(config.agent_spec().unwrap(), AgentSpec::Gemini);
}

#[test]
fn agent_specs_parse() {
    let cases: [(&str, AgentSpec); 9] = [
        ("builtin", AgentSpec::Builtin),
        ("claude", AgentSpec::Claude),
        ("codex", AgentSpec::Codex),
        (" gemini ", AgentSpec::Gemini),
        ("openai", AgentSpec::OpenAi),
        (
            "openai:qwen2.5-coder:14b",
            AgentSpec::OpenAiModel("qwen2.5-coder:14b".into()),
        ),
        ("command:my-agent", AgentSpec::Command(argv(&["my-agent"]))),
        (
            "command:my-agent --json --prompt \"fix the bug\"",
            AgentSpec::Command(argv(&["my-agent", "--json", "--prompt", "fix the bug"])),
        ),
        (
            "command:sh -c 'agent | tee log'",
            AgentSpec::Command(argv(&["sh", "-c", "agent | tee log"])),
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(AgentSpec::parse(text).unwrap(), expected, "{text:?}");
        assert_eq!(text.parse::<AgentSpec>().unwrap().kind(), expected.kind());
    }
}

#[test]
fn bad_agent_specs_say_what_is_accepted() {
    let errors: Vec<String> = [
        "",
        "gpt4",
        "Claude",
        "command",
        "command:",
        "openai:",
        "command:agent | tee",
        "command:agent 'unclosed",
    ]
    .iter()
    .map(|spec| AgentSpec::parse(spec).unwrap_err().to_string())
    .collect();
    insta::assert_snapshot!("agent_spec_errors", errors.join("\n"));
}

#[test]
fn agent_specs_display_as_they_parse() {
    for spec in [
        AgentSpec::Builtin,
        AgentSpec::OpenAi,
        AgentSpec::OpenAiModel("llama3.1:8b".into()),
        AgentSpec::Command(argv(&["my agent", "it's", "", "--x=$y"])),
        AgentSpec::Command(CommandLine::Shell("a | b".into())),
    ] {
        let shown = spec.to_string();
        let back = AgentSpec::parse(&shown).unwrap();
        match &spec {
            // A shell script comes back as the explicit `sh -c` argv.
            AgentSpec::Command(CommandLine::Shell(script)) => {
                assert_eq!(back, AgentSpec::Command(argv(&["sh", "-c", script])));
            }
            _ => assert_eq!(back, spec, "{shown}"),
        }
    }
}

proptest! {
    #[test]
    fn join_then_split_gives_the_words_back(
        words in prop::collection::vec(any::<String>(), 1..6)
    ) {
        let line = join_command(&words);
        prop_assert_eq!(split_command(&line).unwrap(), words);
    }

    #[test]
    fn split_never_panics_and_never_yields_nothing(line in any::<String>()) {
        if let Ok(words) = split_command(&line) {
            prop_assert!(!words.is_empty());
        }
    }
}

#[test]
fn openai_with_a_model_sets_the_model() {
    let mut config =
        Config::parse_str("version = 1\n[agent.openai]\nmodel = \"from-file\"\n").unwrap();
    config.apply_agent_spec(&AgentSpec::parse("openai:from-flag").unwrap());
    assert_eq!(config.agent.kind, AgentKind::Openai);
    assert_eq!(
        config.agent.openai.as_ref().unwrap().model.as_deref(),
        Some("from-flag")
    );
}

/// `shlex` was weighed for splitting command lines and kept out: on every
/// line both accept as plain words they agree, but `shlex` reads what a
/// reader would expect a shell to act on as words or a comment, and would
/// run something else than the line says, where ours refuses it naming the
/// character.
#[test]
fn command_lines_split_like_shlex_except_where_a_shell_would_act() {
    use orchestrator_adapters::config::split_command;
    for line in [
        "cargo test --workspace",
        "pytest -q 'tests/a b.py'",
        r#"sh -c "echo \"hi\"""#,
        r"a\ b c",
        "npm   test\t-- --grep token",
        "x ''",
    ] {
        assert_eq!(split_command(line).ok(), shlex::split(line), "{line}");
    }
    for (line, shlex_reads) in [
        (
            "cargo test | tee log",
            vec!["cargo", "test", "|", "tee", "log"],
        ),
        ("make; rm -rf x", vec!["make;", "rm", "-rf", "x"]),
        ("echo $HOME", vec!["echo", "$HOME"]),
        ("pytest #slow", vec!["pytest"]),
    ] {
        assert_eq!(
            shlex::split(line),
            Some(shlex_reads.iter().map(|w| (*w).to_owned()).collect()),
            "{line}"
        );
        assert_ne!(split_command(line).ok(), shlex::split(line), "{line}");
    }
}
