"""Goldens for the chat templates of the families spec-convert reads besides
the EAGLE ones and ChatML (tests/golden/tokenizer/chat_families_golden.json,
checked by tests/test_chat.c):

  llama-3.1       Meta's Llama 3.1 / 3.2 / 3.3 Instruct templates (the system
                  block with its knowledge and today's date)
  mistral         Mistral-7B-Instruct-v0.2's template (no system role)
  zephyr          HuggingFaceH4/zephyr-7b-beta's, which TinyLlama-1.1B-Chat-v1.0
                  publishes too
  deepseek-coder  deepseek-coder-*-instruct's (### Instruction / ### Response,
                  its own default system message)
  deepseek        DeepSeek-LLM-7B-chat's and DeepSeek-V2's (User: / Assistant:)
  qwen3           Qwen3-0.6B's (the template of Qwen3 0.6B to 32B), enable_thinking
                  left unset; also on conversations whose answers hold <think>
                  blocks and whose last turn is a <tool_response>
  qwen3-no-think  the same template with enable_thinking=False (guessed as qwen3:
                  one template, two ways to call it)
  gemma3          google/gemma-3-4b-it's (the template of Gemma 3 270M to 27B
                  -it); its prompts also as ids: transformers' GemmaTokenizerFast
                  with tests/golden/tokenizer/gemma/ (a Gemma-style vocabulary,
                  tokenizer_oracle.py gemma) tokenizing as apply_chat_template does

Each template's source as its model publishes it: Meta's from the .jinja files
and the others from the test cases of the llama.cpp sdist that `make
deps-llamacpp` unpacks (build/llama.cpp-src), zephyr's and Gemma 3's (its
tokenizer_config.json chat_template) written out below; when
the sdist is absent the sources the golden already holds are used again.  Every
prompt is rendered by transformers' apply_chat_template (add_generation_prompt
= True) on tokenizer_oracle's conversations, the messages built by our
renderer's rules: system None means the template's default (EAGLE's system
prompt for llama-3.1, deepseek-coder's own text, none for the others), ""
none; mistral's template has no system role, so a system message is joined to
the first user turn with a blank line (Gemma 3's template does that itself);
Llama 3.2's date is pinned by date_string (transformers would render today's).

Usage: python3 tools/golden/chat_families_golden.py
"""
import json, os, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_oracle import CONVERSATIONS, EAGLE_SYSTEM, GOLD, ROOT  # noqa: E402

SDIST = os.path.join(ROOT, "build", "llama.cpp-src")
OUT = os.path.join(GOLD, "chat_families_golden.json")
DATE = "26 Jul 2024"
DEEPSEEK_CODER_SYSTEM = ("You are an AI programming assistant, utilizing the Deepseek Coder model, developed by "
                         "Deepseek Company, and you only answer questions related to computer science. For politically "
                         "sensitive questions, security and privacy issues, and other non-computer science questions, "
                         "you will refuse to answer\n")
ZEPHYR = ("{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + "
          "eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n"
          "{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n"
          "{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}")
DS_BOS, DS_EOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>"
# google/gemma-3-4b-it's tokenizer_config.json chat_template (1,532 characters; gemma-3-1b-it, -270m-it, -12b-it
# and -27b-it publish the same)
GEMMA3 = ("{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}\n"
          "    {%- if messages[0]['content'] is string -%}\n        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n    {%- else -%}\n"
          "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}\n    {%- endif -%}\n"
          "    {%- set loop_messages = messages[1:] -%}\n{%- else -%}\n    {%- set first_user_prefix = \"\" -%}\n"
          "    {%- set loop_messages = messages -%}\n{%- endif -%}\n{%- for message in loop_messages -%}\n"
          "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
          "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
          "    {%- endif -%}\n    {%- if (message['role'] == 'assistant') -%}\n        {%- set role = \"model\" -%}\n"
          "    {%- else -%}\n        {%- set role = message['role'] -%}\n    {%- endif -%}\n"
          "    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}\n"
          "    {%- if message['content'] is string -%}\n        {{ message['content'] | trim }}\n"
          "    {%- elif message['content'] is iterable -%}\n        {%- for item in message['content'] -%}\n"
          "            {%- if item['type'] == 'image' -%}\n                {{ '<start_of_image>' }}\n"
          "            {%- elif item['type'] == 'text' -%}\n                {{ item['text'] | trim }}\n"
          "            {%- endif -%}\n        {%- endfor -%}\n    {%- else -%}\n"
          "        {{ raise_exception(\"Invalid content type\") }}\n    {%- endif -%}\n    {{ '<end_of_turn>\n' }}\n"
          "{%- endfor -%}\n{%- if add_generation_prompt -%}\n    {{'<start_of_turn>model\n'}}\n{%- endif -%}\n")
# Gemma 3's template puts the system message before the first user turn untrimmed, where it trims the turns
EXTRA_SYSTEMS = {"gemma3": ("  Spaces round this system message.\n ",)}
# the tokenizer whose ids a family's prompts are also given in
IDS_TOKENIZER = {"gemma3": os.path.join(GOLD, "gemma")}

# (our template, the model whose template it is, where its source is, bos, eos, default system)
FAMILIES = [
    ("llama-3.1", "Meta-Llama-3.1-8B-Instruct", ("file", "meta-llama-Llama-3.1-8B-Instruct.jinja"),
     "<|begin_of_text|>", "<|eot_id|>", EAGLE_SYSTEM),
    ("llama-3.1", "Llama-3.2-3B-Instruct", ("file", "meta-llama-Llama-3.2-3B-Instruct.jinja"),
     "<|begin_of_text|>", "<|eot_id|>", EAGLE_SYSTEM),
    ("llama-3.1", "Llama-3.3-70B-Instruct", ("file", "meta-llama-Llama-3.3-70B-Instruct.jinja"),
     "<|begin_of_text|>", "<|eot_id|>", EAGLE_SYSTEM),
    ("mistral", "Mistral-7B-Instruct-v0.2",
     ("test", "mistralai/Mistral-7B-Instruct-v0.2 (NOTE: Old pre-v1 without a system prompt)"), "<s>", "</s>", ""),
    ("zephyr", "zephyr-7b-beta, TinyLlama-1.1B-Chat-v1.0", ("literal", ZEPHYR), "<s>", "</s>", ""),
    ("deepseek-coder", "deepseek-coder-33b-instruct", ("test", "deepseek-ai/deepseek-coder-33b-instruct"),
     DS_BOS, "<|EOT|>", None),
    ("deepseek", "DeepSeek-LLM-7B-chat, DeepSeek-V2", ("test", "DeepSeek-V2"), DS_BOS, DS_EOS, ""),
    ("qwen3", "Qwen3-0.6B", ("file", "Qwen-Qwen3-0.6B.jinja"), "", "<|im_end|>", ""),
    ("qwen3-no-think", "Qwen3-0.6B, enable_thinking=False", ("file", "Qwen-Qwen3-0.6B.jinja"), "", "<|im_end|>", ""),
    ("gemma3", "gemma-3-4b-it", ("literal", GEMMA3), "<bos>", "<eos>", ""),
]
# Qwen3's template rewrites earlier answers: their <think> blocks dropped, or
# kept after the last user turn that is not a tool's response.
QWEN3_CONVERSATIONS = [
    {"user": ["Is 91 prime?", "And 97?"],
     "assistant": ["<think>\n91 = 7 * 13.\n</think>\n\nNo: 91 = 7 x 13."]},
    {"user": ["Two blocks?", "Then what?", "Last."],
     "assistant": ["<think>first</think>\n\n\nmiddle</think>end", "no think block at all\n"]},
    {"user": ["Call the tool.", "<tool_response>\n42\n</tool_response>"],
     "assistant": ["<think>\n\nI should call it.\n\n</think>\n\nCalling it."]},
    {"user": ["Empty reasoning?", "Go on."],
     "assistant": ["<think>\n\n</think>\n\nYes."]},
]
# Templates of llama.cpp's test cases (and .jinja files) that share markers
# with those above but render otherwise: the guess must not take them for one
# of ours.
NOT_OURS = ["mistralai/Mistral-7B-Instruct-v0.2 (mistralai 'v1' template with a system prompt)",
            "Mistral-Large-Instruct-2407 (mistralai 'v3' template; modified to have system prompt at start)",
            "mistralai/Mistral-Large-Instruct-2411 (mistralai 'v7' template)", "Phi-3-mini", "Phi-3-small",
            "openchat/openchat-3.5-0106", "google/gemma-7b-it", "google-gemma-2-2b-it.jinja"]


def test_case_template(name):
    """The template_str of llama.cpp's test case `name` (tests/test-chat-template.cpp), C escapes undone."""
    src = open(os.path.join(SDIST, "tests", "test-chat-template.cpp"), encoding="utf-8").read()
    at = src.index('/* .name= */ "%s"' % name)
    m = re.compile(r'/\* \.template_str= \*/ (?:u8)?"((?:[^"\\]|\\.)*)"').search(src, at)
    return json.loads('"' + m.group(1).replace("\\'", "'") + '"')


def template_source(where, old):
    kind, what = where
    if kind == "literal":
        return what
    if not os.path.isdir(SDIST):
        return old
    if kind == "file":
        return open(os.path.join(SDIST, "models", "templates", what), encoding="utf-8").read()
    return test_case_template(what)


def messages(template, default_system, system, users, answers):
    """The messages our renderer's rules give transformers for this conversation."""
    sys_text = default_system if system is None else system
    users = list(users)
    msgs = []
    if template == "mistral":
        if sys_text:
            users[0] = sys_text + "\n\n" + users[0]
    elif template == "deepseek-coder":   # without a system message the template writes its own
        if system is not None:
            msgs.append({"role": "system", "content": system})
    elif sys_text:
        msgs.append({"role": "system", "content": sys_text})
    for j, u in enumerate(users):
        msgs.append({"role": "user", "content": u})
        if j < len(answers):
            msgs.append({"role": "assistant", "content": answers[j]})
    return msgs


def main():
    import transformers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast
    from tokenizers import Tokenizer
    old, old_not_ours = {}, {}
    if os.path.exists(OUT):
        g = json.load(open(OUT, encoding="utf-8"))
        old = {f["model"]: f["chat_template"] for f in g["families"]}
        old_not_ours = {f["model"]: f["chat_template"] for f in g.get("not_ours", [])}
    families = []
    for template, model, where, bos, eos, default_system in FAMILIES:
        src = template_source(where, old.get(model))
        tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_file(os.path.join(GOLD, "sp_bytefallback.json")),
                                      bos_token=bos or None, eos_token=eos)
        tok.chat_template = src
        qwen3 = template.startswith("qwen3")
        kwargs = {"enable_thinking": False} if template == "qwen3-no-think" else {}
        ids_tok = AutoTokenizer.from_pretrained(IDS_TOKENIZER[template]) if template in IDS_TOKENIZER else None
        if ids_tok:
            ids_tok.chat_template = src
        rows = []
        for conv in CONVERSATIONS + (QWEN3_CONVERSATIONS if qwen3 else []):
            for system in (None, "", "You are a pirate. Answer in one sentence.") + EXTRA_SYSTEMS.get(template, ()):
                for k in range(1, len(conv["user"]) + 1):
                    users, answers = conv["user"][:k], conv["assistant"][:k - 1]
                    msgs = messages(template, default_system, system, users, answers)
                    prompt = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, date_string=DATE,
                                                     **kwargs)
                    rows.append({"system": system, "user": users, "assistant": answers, "prompt": prompt})
                    if ids_tok:
                        rows[-1]["ids"] = ids_tok.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True)
        families.append({"template": template, "guess": "qwen3" if qwen3 else template, "model": model,
                         "chat_template": src, "bos_token": bos, "eos_token": eos, "prompts": rows})
        print("%-15s %-42s %d prompts" % (template, model, len(rows)))
    not_ours = [{"model": m, "chat_template": template_source(("file" if m.endswith(".jinja") else "test", m),
                                                              old_not_ours.get(m))} for m in NOT_OURS]
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"source": "transformers %s apply_chat_template(add_generation_prompt=True, date_string=%r)"
                             % (transformers.__version__, DATE), "families": families, "not_ours": not_ours},
                  f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
