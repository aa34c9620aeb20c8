"""train_demo.py's evaluation: held-out perplexities, the EAGLE head's top-1
agreement and calibration, greedy samples; stage eval."""
import json
import math
import time

import torch
import torch.nn.functional as F

from c2ttools.progress import log
from train_demo_data import EOS, Corpus, list_corpus, load_tokenizer
from train_demo_eagle import load_eagle
from train_demo_lm import load_lm


@torch.no_grad()
def perplexity(model, windows, bs=8):
    nll, n = 0.0, 0
    for i in range(0, len(windows), bs):
        x = torch.stack(windows[i:i + bs])
        logits = model(input_ids=x).logits.float()
        nll += F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1),
                               reduction="sum").item()
        n += x[:, 1:].numel()
    return math.exp(nll / n), n


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


class Calibration:
    """Is the head's confidence an acceptance rate (EAGLE-2's premise)? For each of the
    head's top-k candidates at a position: its probability q, and whether it is the
    target's greedy token (accepted at temperature 0). result(): bins of q with mean q and
    acceptance, and the expected calibration error over all candidates."""
    edges = torch.tensor([0, .05, .1, .2, .3, .4, .5, .6, .7, .8, .9, 1.0001])

    def __init__(self, k=10):
        self.k, nb = k, len(self.edges) - 1
        self.q_sum, self.acc_sum, self.cnt = torch.zeros(nb), torch.zeros(nb), torch.zeros(nb)

    def add(self, logits, want):
        nb = len(self.edges) - 1
        val, idx = logits.softmax(-1).topk(self.k, -1)
        acc = (idx == want[:, None]).float().reshape(-1)
        val = val.reshape(-1)
        b = (torch.bucketize(val, self.edges, right=True) - 1).clamp(0, nb - 1)
        self.q_sum.index_add_(0, b, val)
        self.acc_sum.index_add_(0, b, acc)
        self.cnt.index_add_(0, b, torch.ones_like(val))

    def result(self):
        e, q, a, c = self.edges, self.q_sum, self.acc_sum, self.cnt
        bins = [dict(lo=round(e[j].item(), 2), hi=round(min(e[j + 1].item(), 1.0), 2), count=int(c[j]),
                     mean_q=round((q[j] / c[j]).item(), 4), accepted=round((a[j] / c[j]).item(), 4))
                for j in range(len(e) - 1) if c[j] > 0]
        return dict(topk=self.k, ece=round(((q - a).abs().sum() / c.sum()).item(), 4), bins=bins)


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
