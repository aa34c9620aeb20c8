/* PyTorch `pytorch_model.bin` (torch.save's zip archive: <archive>/data.pkl,
 * a pickled state dict, and <archive>/data/<key>, each storage's raw bytes),
 * read into the SafeTensors structure so nothing downstream knows the
 * difference.  The zip is read through libzip (CRCs checked); the pickle
 * through infer/model/torch_pickle.c, which executes nothing. */
#ifndef C2T_PTBIN_H
#define C2T_PTBIN_H
#include "infer/model/safetensors.h"

/* Appends the archive at path as one file of st (its storages copied into
 * one buffer the file owns) and its tensors.  0, or -1 with err_set naming
 * path. */
int ptbin_open(SafeTensors *st, const char *path);
#endif
