"""train_demo.py's evaluation: held-out perplexities, the EAGLE head's top-1
agreement and calibration (tools/drafts/eval.py's), greedy samples; stage eval."""
import json
import time

import torch

from c2ttools.progress import log
from drafts.eval import Calibration, perplexity
from drafts.heads import load_eagle
from train_demo_data import EOS, Corpus, list_corpus, load_tokenizer
from train_demo_lm import load_lm


def eagle_one_step(head, target, windows, bs=8):
    """Per batch of windows: the head's logits for every position (one draft step, given
    the target's features of the prefix and the next token), flattened to [N, vocab], and
    the target's greedy token there [N]."""
    for i in range(0, len(windows), bs):
        ids = torch.stack(windows[i:i + bs])
        feat = target.model(input_ids=ids).last_hidden_state
        pred = head(feat[:, :-1], target.model.embed_tokens(ids[:, 1:]))
        logits = target.lm_head(pred)
        yield logits.reshape(-1, logits.shape[-1]), target.lm_head(feat[:, 1:]).argmax(-1).reshape(-1)


@torch.no_grad()
def eagle_agreement(head, target, windows):
    """Top-1 / top-3 agreement of the head with the target's greedy next token."""
    top1 = top3 = n = 0
    for logits, want in eagle_one_step(head, target, windows):
        top1 += (logits.argmax(-1) == want).sum().item()
        top3 += (logits.topk(3, dim=-1).indices == want[:, None]).any(-1).sum().item()
        n += want.numel()
    return top1 / n, top3 / n, n


@torch.no_grad()
def eagle_calibration(head, target, windows, k=10):
    """Calibration (above) of the head's one-step candidates on held-out windows."""
    cal = Calibration(k)
    for logits, want in eagle_one_step(head, target, windows):
        cal.add(logits, want)
    return cal.result()


@torch.no_grad()
def greedy(model, tok, text, n_new=64):
    ids = tok.encode(text).ids
    outp = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=n_new,
                          pad_token_id=tok.token_to_id(EOS))
    return tok.decode(outp[0, len(ids):].tolist(), skip_special_tokens=False)


def stage_eval(args, s, out, st):
    tok = load_tokenizer(out)
    root, _ = list_corpus()
    held = Corpus(tok, root, st["split"]["heldout_files"])
    train = Corpus(tok, root, st["split"]["train_files"])
    T = s["seq_len"]
    wins = held.eval_windows(T, s["eval_windows"])
    res = {}
    target, draft = load_lm(out / "target"), load_lm(out / "draft")
    t0 = time.time()
    for name, model in (("target", target), ("draft", draft)):
        ppl, n = perplexity(model, wins)
        res[f"{name}_heldout_ppl"] = round(ppl, 3)
        log(f"eval: {name} held-out perplexity {ppl:.3f} over {n} tokens")
        res["ppl_tokens"] = n
    tw = train.eval_windows(T, s["eval_windows"] // 2)
    for name, model in (("target", target), ("draft", draft)):
        ppl, _ = perplexity(model, tw)
        res[f"{name}_train_ppl"] = round(ppl, 3)
    if res["target_heldout_ppl"] >= 0.85 * res["draft_heldout_ppl"]:
        log("WARNING: the target's held-out perplexity is not clearly below the draft LM's")
    log(f"eval: train-sample perplexity target {res['target_train_ppl']} draft {res['draft_train_ppl']}")
    if (out / "eagle" / "model.safetensors").exists():
        head = load_eagle(out / "eagle")
        ew = held.eval_windows(T, s["eagle_eval_windows"])
        a1, a3, n = eagle_agreement(head, target, ew)
        res.update(eagle_heldout_top1=round(a1, 4), eagle_heldout_top3=round(a3, 4), eagle_eval_tokens=n)
        b1, b3, _ = eagle_agreement(head, target, train.eval_windows(T, s["eagle_eval_windows"] // 2))
        res.update(eagle_train_top1=round(b1, 4), eagle_train_top3=round(b3, 4))
        log(f"eval: EAGLE held-out top-1 {a1:.4f} top-3 {a3:.4f} ({n} tokens); train sample top-1 {b1:.4f}")
        res["eagle_calibration"] = eagle_calibration(head, target, ew[:60])
        log(f"eval: EAGLE calibration error (top-10 candidates vs greedy acceptance) "
            f"{res['eagle_calibration']['ece']:.4f}")
    samples = []
    for fn in ("code_test.jsonl", "continue_test.jsonl"):
        q = json.loads(open(out / "prompts" / fn).readline())
        samples.append(dict(prompt_file=fn, question_id=q["question_id"], prompt=q["turns"][0],
                            target=greedy(target, tok, q["turns"][0]),
                            draft=greedy(draft, tok, q["turns"][0])))
    res["samples"] = samples
    res["seconds"] = round(time.time() - t0, 1)
    return res
