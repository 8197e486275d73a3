#include "src/io/weight_layouts.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

namespace mha {
namespace {

// The qkv-linear names, one family per module style: q[i], k[i], v[i] go
// together; any output name goes with any family.
struct Family {
  const char* q;
  const char* k;
  const char* v;
};
constexpr Family kFamilies[] = {{"q", "k", "v"},
                                {"W_q", "W_k", "W_v"},
                                {"query", "key", "value"},
                                {"self.query", "self.key", "self.value"},
                                {"attention.query", "attention.key", "attention.value"},
                                {"q_proj", "k_proj", "v_proj"}};
constexpr const char* kOutNames[] = {"out_proj", "W_o", "W",           "fc_out",
                                     "o_proj",   "o",   "output.dense"};
// Fused projections: Phi-3's qkv_proj (qkv-linear, with an output of
// kOutNames); GPT-NeoX's, BLOOM's and Falcon's query_key_value + dense (neox).
constexpr const char* kFusedLinear = "qkv_proj";
constexpr const char* kNeoxQkv = "query_key_value";
constexpr const char* kNeoxOut = "dense";
constexpr const char* kRoles[] = {"q", "k", "v", "out", "qkv"};
constexpr size_t kNamesShown = 24;
constexpr size_t kNearestShown = 5;

bool HasWeight(const ShapeMap& tensors, const std::string& module) {
  return tensors.count(module + ".weight") != 0;
}

bool HasTorch(const ShapeMap& tensors, const std::string& prefix) {
  return tensors.count(prefix + "in_proj_weight") || tensors.count(prefix + "q_proj_weight");
}

std::vector<const Family*> CompleteFamilies(const ShapeMap& tensors, const std::string& prefix) {
  std::vector<const Family*> found;
  for (const Family& f : kFamilies) {
    if (HasWeight(tensors, prefix + f.q) && HasWeight(tensors, prefix + f.k) &&
        HasWeight(tensors, prefix + f.v)) {
      found.push_back(&f);
    }
  }
  return found;
}

std::vector<std::string> OutputsPresent(const ShapeMap& tensors, const std::string& prefix) {
  std::vector<std::string> found;
  for (const char* name : kOutNames) {
    if (HasWeight(tensors, prefix + name)) found.push_back(prefix + name);
  }
  return found;
}

// Every complete module at `prefix`, as detection without options sees it.
std::vector<AttentionModule> CandidatesAt(const ShapeMap& tensors, const std::string& prefix) {
  std::vector<AttentionModule> found;
  if (HasTorch(tensors, prefix)) found.push_back({prefix, WeightLayout::kTorch});
  if (HasWeight(tensors, prefix + "c_attn") && HasWeight(tensors, prefix + "c_proj")) {
    found.push_back({prefix, WeightLayout::kGpt2, "", "", "", prefix + "c_attn", prefix + "c_proj"});
  }
  if (HasWeight(tensors, prefix + kNeoxQkv) && HasWeight(tensors, prefix + kNeoxOut)) {
    found.push_back(
        {prefix, WeightLayout::kNeox, "", "", "", prefix + kNeoxQkv, prefix + kNeoxOut});
  }
  for (const std::string& out : OutputsPresent(tensors, prefix)) {
    for (const Family* f : CompleteFamilies(tensors, prefix)) {
      found.push_back(
          {prefix, WeightLayout::kQkvLinear, prefix + f->q, prefix + f->k, prefix + f->v, "", out});
    }
    if (HasWeight(tensors, prefix + kFusedLinear)) {
      found.push_back({prefix, WeightLayout::kQkvLinear, "", "", "", prefix + kFusedLinear, out});
    }
  }
  return found;
}

// Orders "layer.2." before "layer.10.": digit runs compare as numbers.
bool NaturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i_end = i, j_end = j;
      while (i_end < a.size() && std::isdigit(static_cast<unsigned char>(a[i_end]))) ++i_end;
      while (j_end < b.size() && std::isdigit(static_cast<unsigned char>(b[j_end]))) ++j_end;
      const std::string x = a.substr(i, i_end - i), y = b.substr(j, j_end - j);
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = i_end;
      j = j_end;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

// Shape (rows, cols) of tensor `name` if it is 2-D and not empty.
bool MatrixAt(const ShapeMap& tensors, const std::string& name, int64_t* rows, int64_t* cols) {
  auto it = tensors.find(name);
  if (it == tensors.end() || it->second.size() != 2) return false;
  *rows = it->second[0];
  *cols = it->second[1];
  return *rows > 0 && *cols > 0;
}

bool Matrix(const ShapeMap& tensors, const std::string& module, int64_t* rows, int64_t* cols) {
  return MatrixAt(tensors, module + ".weight", rows, cols);
}

bool DescribeTorch(const ShapeMap& tensors, const std::string& p, AttentionModuleInfo* info) {
  int64_t rows, cols, out_rows, out_cols;
  const bool has_out = Matrix(tensors, p + "out_proj", &out_rows, &out_cols);
  if (MatrixAt(tensors, p + "in_proj_weight", &rows, &cols)) {
    info->embed_dim = info->kdim = info->vdim = cols;
    info->v_size = has_out ? out_cols : rows / 3;
    info->q_size = info->k_size = (rows - info->v_size) / 2;
    if (info->q_size <= 0 || 2 * info->q_size + info->v_size != rows) return false;
  } else if (!MatrixAt(tensors, p + "q_proj_weight", &info->q_size, &info->embed_dim) ||
             !MatrixAt(tensors, p + "k_proj_weight", &info->k_size, &info->kdim) ||
             !MatrixAt(tensors, p + "v_proj_weight", &info->v_size, &info->vdim)) {
    return false;
  }
  info->bias = tensors.count(p + "in_proj_bias") != 0;
  info->bias_kv = tensors.count(p + "bias_k") && tensors.count(p + "bias_v");
  return !has_out || (out_rows == info->embed_dim && out_cols == info->v_size);
}

// The q/k norms' form from q_norm.weight's shape (q_size known).
void DescribeNorms(const ShapeMap& tensors, AttentionModuleInfo* info) {
  const std::string& p = info->module.prefix;
  auto it = tensors.find(p + "q_norm.weight");
  if (it == tensors.end() || it->second.empty() || it->second[0] <= 0) return;
  const Shape& w = it->second;
  if (w.size() == 2 && w[0] * w[1] == info->q_size) info->qk_norm = "head-per-head";
  if (w.size() == 1 && w[0] == info->q_size) info->qk_norm = "all";
  if (w.size() == 1 && w[0] < info->q_size && info->q_size % w[0] == 0) info->qk_norm = "head";
  info->qk_norm_bias = !info->qk_norm.empty() && tensors.count(p + "q_norm.bias") != 0;
}

bool DescribeShapes(const ShapeMap& tensors, const AttentionModule& m, AttentionModuleInfo* info) {
  info->module = m;
  info->sinks = tensors.count(m.prefix + "sinks") != 0;
  if (m.layout == WeightLayout::kTorch) return DescribeTorch(tensors, m.prefix, info);
  int64_t out_rows, out_cols;
  if (!Matrix(tensors, m.out, &out_rows, &out_cols)) return false;
  info->bias = false;
  for (const std::string* role : {&m.q, &m.k, &m.v, &m.qkv, &m.out}) {
    if (!role->empty() && tensors.count(*role + ".bias")) info->bias = true;
  }
  if (!m.qkv.empty() && m.layout != WeightLayout::kGpt2) {  // a fused Linear (q + k + v, E)
    // The heads are in no shape: the query's output features are taken to be
    // the output projection's input (value head dim == query/key head dim),
    // as in every model these layouts come from.
    int64_t fused, embed;
    if (!Matrix(tensors, m.qkv, &fused, &embed) || out_rows != embed) return false;
    info->embed_dim = info->kdim = info->vdim = embed;
    info->q_size = out_cols;
    info->k_size = info->v_size = (fused - out_cols) / 2;
    return info->k_size > 0 && out_cols + 2 * info->k_size == fused;
  }
  if (m.layout == WeightLayout::kGpt2) {  // Conv1D weights are (in, out)
    int64_t embed, fused;
    if (!Matrix(tensors, m.qkv, &embed, &fused) || out_cols != embed) return false;
    info->embed_dim = info->kdim = info->vdim = embed;
    info->v_size = out_rows;
    info->q_size = info->k_size = (fused - out_rows) / 2;
    return info->q_size > 0 && 2 * info->q_size + info->v_size == fused;
  }
  if (!Matrix(tensors, m.q, &info->q_size, &info->embed_dim) ||
      !Matrix(tensors, m.k, &info->k_size, &info->kdim) ||
      !Matrix(tensors, m.v, &info->v_size, &info->vdim)) {
    return false;
  }
  // The output projection reads num_heads value heads: v_size times the
  // query/key head ratio num_heads / num_kv_heads (grouped-query heads).
  const int64_t q = info->q_size, k = info->k_size, v = info->v_size;
  return out_rows == info->embed_dim && q % k == 0 && out_cols % v == 0 &&
         out_cols / v == q / k;
}

bool Describe(const ShapeMap& tensors, const AttentionModule& m, AttentionModuleInfo* info) {
  if (!DescribeShapes(tensors, m, info)) return false;
  DescribeNorms(tensors, info);
  return true;
}

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

// "a, b, c (and 40 more)", names relative to `prefix`.
std::string NamesUnder(const ShapeMap& tensors, const std::string& prefix) {
  std::vector<std::string> names;
  size_t total = 0;
  for (auto it = tensors.lower_bound(prefix);
       it != tensors.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    if (total++ < kNamesShown) names.push_back(it->first.substr(prefix.size()));
  }
  if (total == 0) return "no tensor name starts with " + Quoted(prefix);
  std::string list = "names under " + Quoted(prefix) + ": " + JoinNames(names);
  if (total > names.size()) list += " (and " + std::to_string(total - names.size()) + " more)";
  return list;
}

size_t CommonPrefix(const std::string& a, const std::string& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// Up to five prefixes that hold a module, those sharing most of `prefix` first.
std::string Nearest(const ShapeMap& tensors, const std::string& prefix) {
  std::vector<std::pair<std::string, WeightLayout>> found;
  for (const AttentionModuleInfo& info : ListAttentionModules(tensors)) {
    found.emplace_back(info.module.prefix, info.module.layout);
  }
  if (found.empty()) return "no prefix in this checkpoint holds an attention module";
  std::stable_sort(found.begin(), found.end(), [&](const auto& a, const auto& b) {
    return CommonPrefix(a.first, prefix) > CommonPrefix(b.first, prefix);
  });
  std::vector<std::string> shown;
  for (size_t i = 0; i < found.size() && shown.size() < kNearestShown; ++i) {
    shown.push_back(Quoted(found[i].first) + " (" + LayoutName(found[i].second) + ")");
  }
  return "nearest prefixes holding an attention module: " + JoinNames(shown);
}

Status LayoutError(const ShapeMap& tensors, const std::string& prefix, const std::string& what) {
  return Status::InvalidArgument(what + "; " + NamesUnder(tensors, prefix) + "; " +
                                 Nearest(tensors, prefix));
}

Status CheckNames(const WeightOptions& options) {
  for (const auto& [role, name] : options.names) {
    if (std::find(std::begin(kRoles), std::end(kRoles), role) == std::end(kRoles)) {
      return Status::InvalidArgument("names: unknown role '" + role +
                                     "', expected q, k, v, out or qkv");
    }
    if (name.empty()) return Status::InvalidArgument("names." + role + ": empty module name");
  }
  const auto& n = options.names;
  if (n.count("qkv") && (n.count("q") || n.count("k") || n.count("v"))) {
    return Status::InvalidArgument("names: give either qkv (a fused projection) or q, k and v");
  }
  const size_t separate = n.count("q") + n.count("k") + n.count("v");
  if (separate != 0 && separate != 3) {
    return Status::InvalidArgument("names: q, k and v go together (give all three, or qkv)");
  }
  if ((options.layout == WeightLayout::kTorch || options.layout == WeightLayout::kNeox) &&
      !n.empty()) {
    return Status::InvalidArgument(std::string("names: the ") + LayoutName(options.layout) +
                                   " layout has fixed names; use layout 'qkv-linear' or 'gpt2' "
                                   "with names");
  }
  if (options.layout == WeightLayout::kGpt2 && separate != 0) {
    return Status::InvalidArgument("names: the gpt2 layout has a fused projection (qkv), not "
                                   "q, k and v");
  }
  return Status::Ok();
}

std::string FamilyNames() {
  std::vector<std::string> names;
  for (const Family& f : kFamilies) names.push_back(std::string(f.q) + "/" + f.k + "/" + f.v);
  return JoinNames(names);
}

// Why the forced `layout` (kAuto: any) has no complete module at `p`.
std::string WhatIsMissing(const ShapeMap& tensors, const std::string& p, WeightLayout layout) {
  const bool any = layout == WeightLayout::kAuto;
  if ((any || layout == WeightLayout::kQkvLinear) && !CompleteFamilies(tensors, p).empty()) {
    return "found query/key/value projections but no output projection (one of " +
           JoinNames({std::begin(kOutNames), std::end(kOutNames)}) + ")";
  }
  if ((any || layout == WeightLayout::kGpt2) && HasWeight(tensors, p + "c_attn")) {
    return "found c_attn but no c_proj";
  }
  if ((any || layout == WeightLayout::kNeox) && HasWeight(tensors, p + kNeoxQkv)) {
    return std::string("found ") + kNeoxQkv + " but no " + kNeoxOut;
  }
  switch (layout) {
    case WeightLayout::kTorch:
      return "layout torch: no in_proj_weight or q_proj_weight";
    case WeightLayout::kGpt2:
      return "layout gpt2: no c_attn.weight";
    case WeightLayout::kQkvLinear:
      return "layout qkv-linear: no complete set of projections (" + FamilyNames() + ", or " +
             kFusedLinear + ")";
    case WeightLayout::kNeox:
      return std::string("layout neox: no ") + kNeoxQkv + ".weight";
    case WeightLayout::kAuto:
      break;
  }
  return "no layout matches (torch, qkv-linear, gpt2, neox; for other names pass `names`)";
}

std::string ModuleString(const AttentionModule& m) {
  auto rel = [&](const std::string& full) { return full.substr(m.prefix.size()); };
  switch (m.layout) {
    case WeightLayout::kTorch:
      return "torch";
    case WeightLayout::kGpt2:
    case WeightLayout::kNeox:
      return std::string(LayoutName(m.layout)) + " (" + rel(m.qkv) + ", " + rel(m.out) + ")";
    default:
      if (!m.qkv.empty()) return "qkv-linear (" + rel(m.qkv) + ", " + rel(m.out) + ")";
      return "qkv-linear (" + rel(m.q) + ", " + rel(m.k) + ", " + rel(m.v) + ", " + rel(m.out) + ")";
  }
}

Status Ambiguous(const ShapeMap& tensors, const std::vector<AttentionModule>& found) {
  std::vector<std::string> described;
  for (const AttentionModule& m : found) described.push_back(ModuleString(m));
  return LayoutError(tensors, found[0].prefix,
                     "prefix " + Quoted(found[0].prefix) + " holds " +
                         std::to_string(found.size()) + " candidate attention modules: " +
                         JoinNames(described) + "; choose one with `layout` or `names`");
}

// Detection without `names`: the one complete candidate of `layout` (or any).
Status Detect(const ShapeMap& tensors, const std::string& p, WeightLayout layout,
              AttentionModule* out) {
  std::vector<AttentionModule> found;
  for (AttentionModule& m : CandidatesAt(tensors, p)) {
    if (layout == WeightLayout::kAuto || m.layout == layout) found.push_back(std::move(m));
  }
  if (found.size() > 1) return Ambiguous(tensors, found);
  if (found.empty()) {
    return LayoutError(tensors, p, "no attention module under prefix " + Quoted(p) + " (" +
                                       WhatIsMissing(tensors, p, layout) + ")");
  }
  *out = std::move(found[0]);
  return Status::Ok();
}

// With `names`: the named roles, the others detected within the layout.
Status Resolve(const ShapeMap& tensors, const WeightOptions& options, AttentionModule* m) {
  const std::string& p = options.prefix;
  auto named = [&](const char* role) {
    auto it = options.names.find(role);
    return it == options.names.end() ? std::string() : p + it->second;
  };
  m->prefix = p;
  m->layout = options.layout == WeightLayout::kGpt2 ? WeightLayout::kGpt2 : WeightLayout::kQkvLinear;
  m->qkv = named("qkv");
  m->q = named("q");
  m->k = named("k");
  m->v = named("v");
  m->out = named("out");
  if (m->layout == WeightLayout::kGpt2) {
    if (m->qkv.empty()) m->qkv = p + "c_attn";
    if (m->out.empty()) m->out = p + "c_proj";
  } else if (m->qkv.empty() && m->q.empty()) {
    const std::vector<const Family*> families = CompleteFamilies(tensors, p);
    if (families.size() != 1) {
      return LayoutError(tensors, p,
                         std::string(families.empty() ? "no" : "several") +
                             " sets of query/key/value projections under prefix " + Quoted(p) +
                             " (" + FamilyNames() + "); name them in `names`");
    }
    m->q = p + families[0]->q;
    m->k = p + families[0]->k;
    m->v = p + families[0]->v;
  }
  if (m->out.empty()) {
    const std::vector<std::string> outs = OutputsPresent(tensors, p);
    if (outs.size() != 1) {
      return LayoutError(tensors, p,
                         std::string(outs.empty() ? "no" : "several") +
                             " output projections under prefix " + Quoted(p) + " (" +
                             JoinNames({std::begin(kOutNames), std::end(kOutNames)}) +
                             "); name it in `names.out`");
    }
    m->out = outs[0];
  }
  for (const std::string* module : {&m->q, &m->k, &m->v, &m->qkv, &m->out}) {
    if (!module->empty() && !HasWeight(tensors, *module)) {
      return LayoutError(tensors, p, "no tensor " + Quoted(*module + ".weight"));
    }
  }
  return Status::Ok();
}

}  // namespace

const char* LayoutName(WeightLayout layout) {
  switch (layout) {
    case WeightLayout::kTorch:
      return "torch";
    case WeightLayout::kQkvLinear:
      return "qkv-linear";
    case WeightLayout::kGpt2:
      return "gpt2";
    case WeightLayout::kNeox:
      return "neox";
    case WeightLayout::kAuto:
      break;
  }
  return "auto";
}

Status ParseLayout(const std::string& name, WeightLayout* out) {
  for (WeightLayout layout : {WeightLayout::kAuto, WeightLayout::kTorch, WeightLayout::kQkvLinear,
                              WeightLayout::kGpt2, WeightLayout::kNeox}) {
    if (name == LayoutName(layout)) {
      *out = layout;
      return Status::Ok();
    }
  }
  return Status::InvalidArgument("layout: expected 'torch', 'qkv-linear', 'gpt2' or 'neox' (or "
                                 "'auto'), got '" + name + "'");
}

Status FindAttentionModule(const ShapeMap& tensors, const WeightOptions& options,
                           AttentionModule* out) {
  MHA_RETURN_IF_ERROR(CheckNames(options));
  if (options.names.empty()) return Detect(tensors, options.prefix, options.layout, out);
  return Resolve(tensors, options, out);
}

std::vector<AttentionModuleInfo> ListAttentionModules(const ShapeMap& tensors) {
  std::set<std::string> prefixes = {""};
  for (const auto& entry : tensors) {
    for (size_t dot = entry.first.find('.'); dot != std::string::npos;
         dot = entry.first.find('.', dot + 1)) {
      prefixes.insert(entry.first.substr(0, dot + 1));
    }
  }
  std::vector<std::string> sorted(prefixes.begin(), prefixes.end());
  std::sort(sorted.begin(), sorted.end(), NaturalLess);
  std::vector<AttentionModuleInfo> modules;
  for (const std::string& prefix : sorted) {
    for (const AttentionModule& m : CandidatesAt(tensors, prefix)) {
      AttentionModuleInfo info;
      if (Describe(tensors, m, &info)) modules.push_back(info);
    }
  }
  return modules;
}

}  // namespace mha
