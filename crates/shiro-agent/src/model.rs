//! Which model answers: a model name resolved to a provider (`replay:`, `anthropic:`,
//! `openai:`, `[model] provider`, a `claude…` name), its server and its API key, and the
//! `/model` command. Documented in `docs/providers.md`, "Choosing a provider".
//!
//! Keys are read here and handed to the provider's config, whose `Debug` hides them; no
//! message made here quotes one.

use std::path::Path;
use std::time::Duration;

use shiro_providers::{
    AnthropicConfig, AnthropicProvider, Api, OpenAiConfig, OpenAiProvider, Provider, ReplayProvider,
};
use tokio::io::AsyncReadExt as _;

use super::turn::Agent;
use crate::config::ModelConfig;
use crate::headless::Context;

/// Reads an environment variable; a test passes its own.
pub type Env<'a> = &'a (dyn Fn(&str) -> Result<String, std::env::VarError> + Sync);

/// What a model name asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// `replay:FILE`: play the script in FILE.
    Replay(&'a str),
    /// A model of an HTTP API.
    Http {
        /// The API.
        api: Api,
        /// The model's name as the server knows it (without the prefix).
        model: &'a str,
    },
}

/// Resolves `name`: `replay:FILE`; an `anthropic:` or `openai:` prefix; else `configured`
/// (`[model] provider`); else Anthropic for a name starting with `claude`, OpenAI-compatible
/// for any other.
pub fn target(name: &str, configured: Option<Api>) -> Target<'_> {
    if let Some(path) = name.strip_prefix("replay:") {
        return Target::Replay(path);
    }
    for api in [Api::Anthropic, Api::OpenAi] {
        if let Some(model) = name
            .strip_prefix(api.name())
            .and_then(|rest| rest.strip_prefix(':'))
        {
            return Target::Http { api, model };
        }
    }
    let api = configured.unwrap_or_else(|| {
        if name.trim_start().to_ascii_lowercase().starts_with("claude") {
            Api::Anthropic
        } else {
            Api::OpenAi
        }
    });
    Target::Http { api, model: name }
}

/// The API that `[model]`'s server and key settings (`base_url`, `api_key_env`,
/// `api_key_cmd`) belong to: `[model] provider`, else the API of `[model] name`, else
/// OpenAI's. A model of the other API never gets them, so a key is never sent to a server
/// it was not meant for.
pub fn configured_api(model: &ModelConfig) -> Api {
    match target(model.name.as_deref().unwrap_or_default(), model.provider) {
        Target::Http { api, .. } => api,
        Target::Replay(_) => model.provider.unwrap_or(Api::OpenAi),
    }
}

/// The model: `--model` > `SHIRO_MODEL` > `[model] name`, resolved by [`target`], at
/// `{API}_BASE_URL` > `[model] base_url` > the API's own endpoint, with the key of
/// [`api_key`]. Failing to make one is reported when a prompt is sent, so that `/undo`,
/// `/log` and the rest work without a model.
pub async fn provider(
    ctx: &Context,
    flag: Option<&str>,
    env: Env<'_>,
) -> Result<Box<dyn Provider>, String> {
    let var = |name: &str| env(name).ok().filter(|value| !value.trim().is_empty());
    let name = flag
        .map(str::to_owned)
        .or_else(|| var("SHIRO_MODEL"))
        .or_else(|| ctx.config.model.name.clone())
        .ok_or_else(|| {
            "no model is set: pass --model NAME, set SHIRO_MODEL, or put `name` under [model] in .shiro/config.toml (`shiro demo` runs offline)".to_owned()
        })?;
    let settings = &ctx.config.model;
    let (api, model) = match target(&name, settings.provider) {
        Target::Replay(path) => {
            let script = std::fs::read_to_string(path)
                .map_err(|err| format!("cannot read the replay script {path}: {err}"))?;
            return ReplayProvider::from_script_file(Path::new(path), &script)
                .map(|provider| Box::new(provider) as Box<dyn Provider>)
                .map_err(|err| err.to_string());
        }
        Target::Http { api, model } => (api, model),
    };
    let own = (configured_api(settings) == api).then_some(settings);
    let base_url = var(api.base_url_var()).or_else(|| own.and_then(|own| own.base_url.clone()));
    let mut key = api_key(api, own, env, &ctx.root).await?;
    // Anthropic's gateways may want a bearer token (Claude Code's variable).
    let mut token = match api {
        Api::Anthropic => var(AUTH_TOKEN_VAR).map(|token| token.trim().to_owned()),
        Api::OpenAi => None,
    };
    if key.value.is_none() && token.is_some() {
        key.hint = format!("check {AUTH_TOKEN_VAR}");
    }
    let workspace_url = var(api.base_url_var()).is_none()
        && own.is_some_and(|own| own.base_url.is_some())
        && ctx.config.base_url_from_workspace;
    if workspace_url
        && (key.value.is_some() || token.is_some())
        && !crate::trust::is_trusted(ctx.config.user_dir.as_deref(), &ctx.root)
    {
        // A cloned repository must not be able to collect the user's key: its server is
        // asked without one (a local server needs none), and a refusal says what to do.
        key = Key {
            value: None,
            hint: "this workspace's .shiro/config.toml names the server ([model] base_url), so your key is not sent there until you trust the workspace: check the address, then /trust".to_owned(),
        };
        token = None;
    }
    let timeout = settings.timeout_secs.map(Duration::from_secs);
    let built = match api {
        Api::OpenAi => {
            let mut config = OpenAiConfig::new(model);
            if let Some(url) = base_url {
                config.base_url = url;
            }
            config.api_key = key.value;
            config.key_hint = key.hint;
            config.timeout = timeout.unwrap_or(config.timeout);
            OpenAiProvider::new(config).map(|provider| Box::new(provider) as Box<dyn Provider>)
        }
        Api::Anthropic => {
            let mut config = AnthropicConfig::new(model);
            if let Some(url) = base_url {
                config.base_url = url;
            }
            config.api_key = key.value;
            config.auth_token = token;
            config.key_hint = key.hint;
            config.timeout = timeout.unwrap_or(config.timeout);
            config.max_tokens = settings.max_tokens.unwrap_or(config.max_tokens);
            AnthropicProvider::new(config).map(|provider| Box::new(provider) as Box<dyn Provider>)
        }
    };
    built.map_err(|err| err.to_string())
}

/// The variable of a bearer token for Anthropic's API (or a gateway in front of it), sent
/// as `Authorization: Bearer …`, as Claude Code sends it.
pub const AUTH_TOKEN_VAR: &str = "ANTHROPIC_AUTH_TOKEN";

/// An API key and what to tell the user when the server refuses it.
#[derive(PartialEq, Eq)]
pub struct Key {
    /// The key, if one was found.
    pub value: Option<String>,
    /// Where it came from, as advice: `set ANTHROPIC_API_KEY`, or the command to check.
    pub hint: String,
}

// By hand, so that the key never shows.
impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("value", &self.value.as_ref().map(|_| "<redacted>"))
            .field("hint", &self.hint)
            .finish()
    }
}

/// The key for `api`, first found of: the variable `[model] api_key_env` names; the output
/// of `[model] api_key_cmd`; the API's own variable (`ANTHROPIC_API_KEY`,
/// `OPENAI_API_KEY`). `settings` is `None` for a model of another API than the configured
/// one, which only gets its own variable. No key at all is not an error: local servers need
/// none, and a server that does says so.
pub async fn api_key(
    api: Api,
    settings: Option<&ModelConfig>,
    env: Env<'_>,
    root: &Path,
) -> Result<Key, String> {
    let var = |name: &str| env(name).ok().filter(|value| !value.trim().is_empty());
    let named = settings.and_then(|settings| settings.api_key_env.as_deref());
    if let Some(name) = named
        && let Some(value) = var(name)
    {
        return Ok(Key {
            value: Some(value.trim().to_owned()),
            hint: format!("set {name}"),
        });
    }
    if let Some(command) = settings.and_then(|settings| settings.api_key_cmd.as_deref()) {
        return Ok(Key {
            value: Some(key_from_command(command, root).await?),
            hint: format!("check the key `{command}` prints ([model] api_key_cmd)"),
        });
    }
    let standard = api.key_var();
    Ok(Key {
        value: var(standard).map(|value| value.trim().to_owned()),
        hint: format!("set {}", named.unwrap_or(standard)),
    })
}

/// How long `api_key_cmd` may take: a password manager may wait for the user to unlock it.
pub const KEY_COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `command` with `sh -c` in `root` and returns its output, trimmed. The errors name
/// the command and never quote its output.
async fn key_from_command(command: &str, root: &Path) -> Result<String, String> {
    let what = format!("[model] api_key_cmd `{command}`");
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(root)
        // It must not read the terminal the UI owns; a password manager asks in its own
        // window (pinentry) or agent.
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| format!("cannot run {what}: {err}"))?;
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let run = async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let read_out = async {
            if let Some(pipe) = stdout.as_mut() {
                let _ = pipe.read_to_end(&mut out).await;
            }
        };
        let read_err = async {
            if let Some(pipe) = stderr.as_mut() {
                let _ = pipe.read_to_end(&mut err).await;
            }
        };
        tokio::join!(read_out, read_err);
        let status = child.wait().await;
        (status, out, err)
    };
    let (status, out, err) = tokio::time::timeout(KEY_COMMAND_TIMEOUT, run)
        .await
        .map_err(|_| {
            format!(
                "{what} did not finish within {} seconds",
                KEY_COMMAND_TIMEOUT.as_secs()
            )
        })?;
    let status = status.map_err(|err| format!("cannot run {what}: {err}"))?;
    if !status.success() {
        // Its error output says why (a locked store, a missing entry); its standard output
        // is never shown, since it may hold the key.
        let why = String::from_utf8_lossy(&err);
        let why = why.lines().map(str::trim).find(|line| !line.is_empty());
        let status = match status.code() {
            Some(code) => format!("exit status {code}"),
            None => "killed by a signal".to_owned(),
        };
        return Err(match why {
            Some(why) => format!("{what} failed ({status}): {}", clip(why)),
            None => format!("{what} failed ({status})"),
        });
    }
    let key = String::from_utf8(out)
        .map_err(|_| format!("{what} printed something that is not UTF-8 text"))?;
    let key = key.trim();
    if key.is_empty() {
        return Err(format!("{what} printed nothing; it must print the API key"));
    }
    if key.contains('\n') {
        return Err(format!(
            "{what} printed more than one line; make it print only the key (e.g. `… | head -n 1`)"
        ));
    }
    Ok(key.to_owned())
}

/// At most 200 characters of a line, for an error message.
fn clip(line: &str) -> String {
    match line.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

/// `/model`: without an argument, the model and its provider; with a name, switches to it
/// (resolved as `--model` is) and keeps the conversation. A name that cannot be used
/// leaves the current model in place and says why.
pub async fn model_command(agent: &mut Agent<'_>, args: &str, env: Env<'_>) -> String {
    let current = describe(&agent.provider);
    let name = args.trim();
    if name.is_empty() {
        return format!(
            "{current}\n(/model NAME switches; `anthropic:NAME` or `openai:NAME` picks the API)"
        );
    }
    match provider(agent.ctx, Some(name), env).await {
        Ok(provider) => {
            agent.provider = Ok(provider);
            format!(
                "switched to {}; the conversation goes on with it",
                describe(&agent.provider).trim_start_matches("model: ")
            )
        }
        Err(why) => format!("the model was not changed ({current}): {why}"),
    }
}

/// `model: NAME (provider)`, or why there is none.
fn describe(provider: &Result<Box<dyn Provider>, String>) -> String {
    match provider {
        Ok(provider) => format!("model: {} ({})", provider.model(), provider.kind()),
        Err(why) => format!("no model: {why}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_to_apis() {
        let http = |api, model| Target::Http { api, model };
        assert_eq!(
            target("anthropic:claude-x", None),
            http(Api::Anthropic, "claude-x")
        );
        assert_eq!(
            target("openai:claude-x", None),
            http(Api::OpenAi, "claude-x")
        );
        assert_eq!(
            target("claude-sonnet-4-5", None),
            http(Api::Anthropic, "claude-sonnet-4-5")
        );
        assert_eq!(
            target("claude-sonnet-4-5", Some(Api::OpenAi)),
            http(Api::OpenAi, "claude-sonnet-4-5")
        );
        assert_eq!(target("gpt-4o", None), http(Api::OpenAi, "gpt-4o"));
        // Ollama's tags have colons too; only the two API names are prefixes.
        assert_eq!(
            target("qwen2.5-coder:7b", Some(Api::Anthropic)),
            http(Api::Anthropic, "qwen2.5-coder:7b")
        );
        assert_eq!(target("replay:a.json", None), Target::Replay("a.json"));
    }

    #[test]
    fn the_config_settings_belong_to_one_api() {
        let config = |name: Option<&str>, provider| ModelConfig {
            name: name.map(str::to_owned),
            provider,
            ..ModelConfig::default()
        };
        assert_eq!(configured_api(&config(None, None)), Api::OpenAi);
        assert_eq!(
            configured_api(&config(Some("claude-x"), None)),
            Api::Anthropic
        );
        assert_eq!(
            configured_api(&config(Some("claude-x"), Some(Api::OpenAi))),
            Api::OpenAi
        );
        assert_eq!(
            configured_api(&config(Some("anthropic:m"), Some(Api::OpenAi))),
            Api::Anthropic
        );
    }

    fn env_of(
        pairs: &'static [(&'static str, &'static str)],
    ) -> impl Fn(&str) -> Result<String, std::env::VarError> + Sync {
        move |name: &str| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
                .ok_or(std::env::VarError::NotPresent)
        }
    }

    #[tokio::test]
    async fn the_key_comes_from_the_named_variable_then_the_command_then_the_standard_one() {
        let root = std::env::temp_dir();
        let settings = ModelConfig {
            api_key_env: Some("MY_KEY".into()),
            api_key_cmd: Some("printf ' from-cmd\\n'".into()),
            ..ModelConfig::default()
        };
        let all = env_of(&[("MY_KEY", "from-var"), ("ANTHROPIC_API_KEY", "standard")]);
        let key = api_key(Api::Anthropic, Some(&settings), &all, &root)
            .await
            .unwrap();
        assert_eq!(
            (key.value.as_deref(), key.hint.as_str()),
            (Some("from-var"), "set MY_KEY")
        );

        let no_named = env_of(&[("ANTHROPIC_API_KEY", "standard")]);
        let key = api_key(Api::Anthropic, Some(&settings), &no_named, &root)
            .await
            .unwrap();
        assert_eq!(key.value.as_deref(), Some("from-cmd"));
        insta::assert_snapshot!(key.hint, @"check the key `printf ' from-cmd\\n'` prints ([model] api_key_cmd)");

        // A model of another API than the configured one gets only its own variable.
        let key = api_key(Api::Anthropic, None, &no_named, &root)
            .await
            .unwrap();
        assert_eq!(
            (key.value.as_deref(), key.hint.as_str()),
            (Some("standard"), "set ANTHROPIC_API_KEY")
        );

        let nothing = env_of(&[]);
        let key = api_key(Api::OpenAi, None, &nothing, &root).await.unwrap();
        assert_eq!((key.value, key.hint.as_str()), (None, "set OPENAI_API_KEY"));
        assert!(
            !format!(
                "{:?}",
                api_key(Api::Anthropic, None, &no_named, &root).await
            )
            .contains("standard")
        );
    }

    #[tokio::test]
    async fn a_failing_key_command_is_named_and_its_output_never_shown() {
        let root = std::env::temp_dir();
        let fails = |command: &str| ModelConfig {
            api_key_cmd: Some(command.to_owned()),
            ..ModelConfig::default()
        };
        let nothing = env_of(&[]);
        let mut errors = Vec::new();
        for command in [
            // The key is printed, but the command's text does not hold it.
            "printf 'sk-%s\\n' secret-1; echo 'entry not found' >&2; exit 3",
            "true",
            "printf 'sk-%s\\nurl: x\\n' secret-2",
            "kill -9 $$",
        ] {
            let error = api_key(Api::Anthropic, Some(&fails(command)), &nothing, &root)
                .await
                .unwrap_err();
            assert!(!error.contains("sk-secret"), "{error}");
            errors.push(error);
        }
        insta::assert_snapshot!(errors.join("\n"), @r#"
            [model] api_key_cmd `printf 'sk-%s\n' secret-1; echo 'entry not found' >&2; exit 3` failed (exit status 3): entry not found
            [model] api_key_cmd `true` printed nothing; it must print the API key
            [model] api_key_cmd `printf 'sk-%s\nurl: x\n' secret-2` printed more than one line; make it print only the key (e.g. `… | head -n 1`)
            [model] api_key_cmd `kill -9 $$` failed (killed by a signal)
            "#);
    }
}
