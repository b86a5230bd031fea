// The compiled capture of a torch dump (ts_torch/compiled_capture.py loads it).
//
// A TorchFunctionMode whose __torch_function__ is this file's Capture.call: no Python frame runs
// per API call. For a call that is dumped it reads, before the call, every tensor of the
// arguments (dtype, shape, device, requires_grad and the four statistics, in one pass of tscore's
// C kernel over host memory), runs the call, reads the output the same way, takes the calling
// stack's id (walked as code objects and instruction offsets, worked out in Python only for a
// new one), and hooks the output's grad_fn with a C++ post hook that reads the gradients.
// Each call becomes one tuple appended to `pending`, tensors replaced by TensorSummary tuples;
// Python hands the tuples to the recorder at each module call and at stop(): Python runs per
// module call and per batch, never per API call.
//
// A tensor the kernel cannot read as it lies (another device, a subclass, a dtype the kernel
// does not know, a storage that does not hold its elements) is summarised by the backend's own
// Python statistics, as the Python capture does. An exception inside the capture's own work is
// handed to `on_error` once; the capture then only passes calls on.

#include <ATen/ATen.h>
#include <Python.h>
#include <frameobject.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <type_traits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

// tscore_array_stats (tscore/compare/pair_kernel.c): largest, smallest, sum, sum of squares, NaN count
using StatsKernel = int (*)(const void*, int, int64_t, double*);

// A grad_fn: std::shared_ptr<Node> before torch 2.10, c10::intrusive_ptr<Node> since; held weakly either way
using NodePtr = std::decay_t<decltype(std::declval<const at::Tensor&>().grad_fn())>;
template <class P>
struct Weak;
template <class T>
struct Weak<std::shared_ptr<T>> {
  using type = std::weak_ptr<T>;
  static std::shared_ptr<T> lock(const type& weak) { return weak.lock(); }
};
template <class T>
struct Weak<c10::intrusive_ptr<T>> {
  using type = c10::weak_intrusive_ptr<T>;
  static c10::intrusive_ptr<T> lock(const type& weak) { return weak.lock(); }
};
using WeakNode = Weak<NodePtr>::type;

constexpr Py_ssize_t kFlushAt = 2048;  // calls held before Python is asked to take them mid-module
constexpr size_t kPruneAt = 4096;      // statistics held before those of dead tensors are dropped

// Statistics read of a tensor: `finished` when they are the kernel's four numbers (JSON-ready) or None
// (no elements); else what the backend's own ts_tensor_stats gave, for the writer to finish.
struct Known {
  py::object value;
  bool finished = false;
};

struct State {
  py::object names;           // dict: function -> (prefix, api), or None when it is no API
  py::object name_of;         // function -> (prefix, api) | None, for a function not met yet
  py::object recorder;        // its `busy` is read per call: its own framework calls are not reported
  py::object describe_value;  // (side, path, value) -> entries: the recorder's own, for other values
  py::object skipped;         // the dtypes whose tensors are left out (a set of names)
  Py_ssize_t longest_plain_list = 16;
  py::object python_stats;    // tensor -> statistics, the backend's own, for what the kernel cannot read
  py::object neutral_dtype;   // torch.dtype -> tscore's name of it
  py::object stack_here;      // () -> stack id, for a stack not met yet; None: no stacks
  py::object on_full;         // () -> None: take the pending calls now
  py::object on_error;        // (message) -> None
  py::object plain_types;     // (torch.Tensor, nn.Parameter): the kernel reads only these
  py::object raised;          // the marker of a call that raised
  py::object pending;         // the held calls (a list)
  py::object framework;       // the backend's name, for the recorder's device settings
  StatsKernel kernel = nullptr;
  bool backward = false;
  bool installed = false;
  bool failed = false;
  int busy = 0;
  int64_t next_call = 0;
  std::unordered_map<std::string, py::object> stacks;  // stack id by the frames' codes and offsets
  std::vector<py::object> held_codes;                  // the codes of those keys: no id is reused
  // statistics already read this step, by the tensor's memory, version counter, dtype and layout;
  // each held with a weak pointer to the tensor it was read of: it counts while that tensor lives
  std::unordered_map<std::string, std::pair<c10::weak_intrusive_ptr<c10::TensorImpl>, Known>> seen;
  std::unordered_map<const void*, std::vector<std::string>> seen_by_memory;
  size_t prune_at = kPruneAt;
  std::unordered_map<int, int> codes;  // the kernel's dtype codes, by ScalarType
  std::unordered_map<int, py::object> dtype_names;
  std::unordered_map<std::string, py::object> device_names;
  std::unordered_map<std::string, py::object> entry_names;  // "_input.0" ... as Python strings
  // the grad_fn hooks added: node, the key to remove the hook by, the call it reports
  std::vector<std::tuple<WeakNode, uintptr_t, int64_t>> hooks;
  size_t prune_hooks_at = kPruneAt;
  int in_hook = 0;                 // > 0 while a BackwardHook runs: no hook is removed then
  bool under_compiled_autograd = false;  // a backward ran under compiled autograd: its calls went unseen
  py::object noted;                // the recorder's set of devices whose settings it has read
  py::object note_device;          // (framework, device) -> None: read a device's settings now
};

int kernel_code(const State& s, at::ScalarType type) {
  auto found = s.codes.find(static_cast<int>(type));
  return found == s.codes.end() ? -1 : found->second;
}

// "TypeName: message" of a Python exception, without its traceback
std::string described(py::error_already_set& exc) {
  try {
    std::string type = py::str(exc.type().attr("__name__")).cast<std::string>();
    return type + ": " + py::str(exc.value()).cast<std::string>();
  } catch (...) {
    PyErr_Clear();
    return "an exception in the capture";
  }
}

// The strings every entry holds (its keys, "tensor", "nan"), made and interned once, not built from C
// strings again for each of the hundreds of entries a step makes.
struct Words {
  py::object name, type, dtype, shape, device, requires_grad, max, min, mean, norm, stats, value, length,
      tensor, ellipsis, slice, dots, nan, inf, minus_inf;
};

const Words& words() {
  static const Words* made = [] {
    auto word = [](const char* text) {
      PyObject* interned = PyUnicode_InternFromString(text);
      if (interned == nullptr) throw py::error_already_set();
      return py::reinterpret_steal<py::object>(interned);
    };
    return new Words{word("name"),  word("type"), word("dtype"),    word("shape"), word("device"),
                     word("requires_grad"), word("max"), word("min"), word("mean"), word("norm"),
                     word("stats"), word("value"), word("length"),  word("tensor"), word("ellipsis"),
                     word("slice"), word("..."), word("nan"),       word("inf"), word("-inf")};
  }();  // never freed: the interpreter may still hold them when the module goes
  return *made;
}

// Set `key` of a dict to `value`; a failed insert (no memory) raises as pybind11's own calls do.
void put(const py::dict& entry, const py::object& key, py::handle value) {
  if (PyDict_SetItem(entry.ptr(), key.ptr(), value.ptr()) < 0) throw py::error_already_set();
}

// One statistic as the record's JSON holds it: a float, or "nan", "inf", "-inf" (JSON has no such numbers)
py::object json_number(double value) {
  if (std::isnan(value)) return words().nan;
  if (std::isinf(value)) return value > 0 ? words().inf : words().minus_inf;
  return py::float_(value);
}

// type(value).__name__
py::object type_name(PyObject* value) {
  return py::reinterpret_steal<py::object>(PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(value)), "__name__"));
}

py::object dtype_name(State& s, at::ScalarType type) {
  auto found = s.dtype_names.find(static_cast<int>(type));
  if (found != s.dtype_names.end()) return found->second;
  py::object made = s.neutral_dtype(py::handle(reinterpret_cast<PyObject*>(torch::getTHPDtype(type))));
  s.dtype_names.emplace(static_cast<int>(type), made);
  return made;
}

py::object device_name(State& s, const at::Tensor& t) {
  std::string text = t.device().str();
  auto found = s.device_names.find(text);
  if (found != s.device_names.end()) return found->second;
  py::object made = py::str(text);
  s.device_names.emplace(text, made);
  return made;
}

// The four statistics of a plain CPU tensor by the kernel, finished; none (no value) where it cannot read it.
Known kernel_stats(State& s, PyObject* obj, const at::Tensor& t) {
  if (s.kernel == nullptr || !t.is_cpu() || t.layout() != at::kStrided || t.is_neg() || t.is_conj()) {
    return Known{};
  }
  if (!PySequence_Contains(s.plain_types.ptr(), reinterpret_cast<PyObject*>(Py_TYPE(obj)))) {
    return Known{};
  }
  int code = kernel_code(s, t.scalar_type());
  if (code < 0) return Known{};
  at::Tensor c = t.is_contiguous() ? t : t.contiguous();
  const void* data = c.const_data_ptr();
  int64_t count = c.numel();
  size_t size = c.element_size();
  if (data == nullptr || reinterpret_cast<uintptr_t>(data) % size != 0) return Known{};
  if (c.storage_offset() != 0 &&
      c.storage().nbytes() < static_cast<size_t>(c.storage_offset() + count) * size) {
    return Known{};  // a view past the end of a storage FSDP freed
  }
  double acc[5];
  int failed;
  // the GIL is kept: letting go of it for a few microseconds hands it to the dump's writer thread,
  // which may then hold it for the interpreter's whole switch interval (5 ms)
  failed = s.kernel(data, code, count, acc);
  if (failed) return Known{};
  if (acc[4] != 0.0) {  // one NaN makes every statistic NaN, as numpy's and torch's reductions
    const py::object& nan = words().nan;
    return Known{py::make_tuple(nan, nan, nan, nan), true};
  }
  return Known{py::make_tuple(json_number(acc[0]), json_number(acc[1]),
                              json_number(acc[2] / static_cast<double>(count)), json_number(std::sqrt(acc[3]))),
               true};
}

// The key of a tensor's contents: memory, version counter (it moves on every in-place change), dtype,
// shape and strides, as the Python capture's ts_tensor_key; empty when there is none (inference tensors).
std::string contents_key(const at::Tensor& t, const void*& memory) {
  std::string key;
  if (t.is_inference() || t.layout() != at::kStrided) return key;
  memory = t.data_ptr();
  int64_t version = static_cast<int64_t>(t._version());
  int dtype = static_cast<int>(t.scalar_type());
  key.append(reinterpret_cast<const char*>(&memory), sizeof(memory));
  key.append(reinterpret_cast<const char*>(&version), sizeof(version));
  key.append(reinterpret_cast<const char*>(&dtype), sizeof(dtype));
  for (int64_t size : t.sizes()) key.append(reinterpret_cast<const char*>(&size), sizeof(size));
  int64_t mark = -1;
  key.append(reinterpret_cast<const char*>(&mark), sizeof(mark));
  for (int64_t stride : t.strides()) key.append(reinterpret_cast<const char*>(&stride), sizeof(stride));
  return key;
}

void prune_seen(State& s) {
  for (auto it = s.seen.begin(); it != s.seen.end();) {
    it = it->second.first.expired() ? s.seen.erase(it) : std::next(it);
  }
  for (auto it = s.seen_by_memory.begin(); it != s.seen_by_memory.end();) {
    auto& keys = it->second;
    keys.erase(std::remove_if(keys.begin(), keys.end(), [&](const std::string& k) { return !s.seen.count(k); }),
               keys.end());
    it = keys.empty() ? s.seen_by_memory.erase(it) : std::next(it);
  }
  s.prune_at = std::max(kPruneAt, 2 * s.seen.size());
}

// The statistics read earlier in the step of the same unchanged tensor, or None. `written`: the
// tensor is a call's output, which may just have changed memory that entries know under other keys
// (x.data.add_, whose version counter is not x's): those entries end.
Known seen_stats(State& s, const at::Tensor& t, bool written, std::string& key, const void*& memory) {
  key = contents_key(t, memory);
  if (key.empty()) return Known{};
  if (written) {
    auto others = s.seen_by_memory.find(memory);
    if (others != s.seen_by_memory.end()) {
      for (const std::string& other : others->second) {
        if (other != key) s.seen.erase(other);
      }
      others->second.erase(std::remove_if(others->second.begin(), others->second.end(),
                                          [&](const std::string& k) { return k != key; }),
                           others->second.end());
    }
  }
  auto found = s.seen.find(key);
  if (found == s.seen.end()) return Known{};
  if (found->second.first.expired()) {
    s.seen.erase(found);
    return Known{};
  }
  return found->second.second;
}

void remember_stats(State& s, const at::Tensor& t, const std::string& key, const void* memory, const Known& stats) {
  if (key.empty()) return;
  s.seen.insert_or_assign(key, std::make_pair(c10::weak_intrusive_ptr<c10::TensorImpl>(t.getIntrusivePtr()), stats));
  auto& keys = s.seen_by_memory[memory];
  if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  if (s.seen.size() > s.prune_at) prune_seen(s);
}

// The record entry of one tensor, named `name` (the part after the call's name: "_input.0"); None when
// its dtype is left out (filter_int). Statistics the kernel read are finished here (max, min, mean,
// norm); the backend's own stay under "stats", for the writer to finish as the Python capture's are.
py::object tensor_entry(State& s, PyObject* obj, const py::object& name, bool written) {
  const at::Tensor& t = THPVariable_Unpack(obj);
  const Words& w = words();
  py::dict entry;
  put(entry, w.name, name);
  put(entry, w.type, w.tensor);
  py::object device = py::none();  // an error entry carries it as "_device", which the recorder takes off
  try {
    py::object dtype = dtype_name(s, t.scalar_type());
    if (PySet_Contains(s.skipped.ptr(), dtype.ptr()) == 1) return py::none();
    put(entry, w.dtype, dtype);
    auto sizes = t.sizes();
    py::tuple shape(sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      PyObject* size = PyLong_FromLongLong(sizes[i]);
      if (size == nullptr) throw py::error_already_set();
      PyTuple_SET_ITEM(shape.ptr(), static_cast<Py_ssize_t>(i), size);  // steals it
    }
    // ints only: no cycle can pass through it. Untracked now, the entry (strings, numbers and this)
    // stays out of the garbage collector's reach, which otherwise walks every held entry again and again
    PyObject_GC_UnTrack(shape.ptr());
    put(entry, w.shape, shape);
    device = device_name(s, t);
    put(entry, w.device, device);
    if (s.noted && PySet_Contains(s.noted.ptr(), device.ptr()) == 0) {
      s.note_device(s.framework, device);  // its settings (autocast ...) as they are at the call
    }
    put(entry, w.requires_grad, t.requires_grad() ? Py_True : Py_False);
    Known stats;
    std::string key;
    const void* memory = nullptr;
    if (!t.is_meta() && t.numel() == 0) {
      stats = Known{py::none(), true};
    } else {
      try {
        stats = seen_stats(s, t, written, key, memory);
        if (!stats.value) stats = kernel_stats(s, obj, t);
      } catch (const c10::Error&) {
        stats = Known{};  // inside vmap, or no storage at all: the backend's statistics say what they can
        key.clear();
      }
      if (!stats.value) stats = Known{s.python_stats(py::handle(obj)), false};
      remember_stats(s, t, key, memory, stats);
    }
    if (!stats.finished) {
      put(entry, w.stats, stats.value);
    } else if (stats.value.is_none()) {
      for (const py::object* field : {&w.max, &w.min, &w.mean, &w.norm}) put(entry, *field, Py_None);
    } else {
      PyObject* four = stats.value.ptr();
      put(entry, w.max, PyTuple_GET_ITEM(four, 0));
      put(entry, w.min, PyTuple_GET_ITEM(four, 1));
      put(entry, w.mean, PyTuple_GET_ITEM(four, 2));
      put(entry, w.norm, PyTuple_GET_ITEM(four, 3));
    }
    return std::move(entry);
  } catch (py::error_already_set& exc) {  // a meta or sparse tensor: the record says so
    return py::dict(py::arg("name") = name, py::arg("type") = "tensor", py::arg("error") = described(exc),
                    py::arg("_device") = device);
  } catch (const c10::Error& exc) {
    return py::dict(py::arg("name") = name, py::arg("type") = "tensor",
                    py::arg("error") = std::string("RuntimeError: ") + exc.what_without_backtrace(),
                    py::arg("_device") = device);
  }
}

bool plain(PyObject* value) {
  return value == Py_None || PyLong_Check(value) || PyFloat_Check(value) || PyUnicode_Check(value);
}

// The entry's name after the call's ("_input.0", "_output"), one Python string per distinct name
py::object joined(State& s, const std::string& side, const std::vector<std::string>& path) {
  std::string name = "_" + side;
  for (const std::string& part : path) name += "." + part;
  auto found = s.entry_names.find(name);
  if (found != s.entry_names.end()) return found->second;
  if (s.entry_names.size() >= kPruneAt) s.entry_names.clear();  // keyword names are the user's: keep it bounded
  py::object made = py::str(name);
  s.entry_names.emplace(std::move(name), made);
  return made;
}

// Append the entries of one value to `out`, as the recorder's _describe names and spells them.
void describe(State& s, PyObject* value, const std::string& side, std::vector<std::string>& path, bool written,
              py::list& out) {
  py::object name = joined(s, side, path);
  const Words& w = words();
  if (THPVariable_Check(value)) {
    py::object entry = tensor_entry(s, value, name, written);
    if (!entry.is_none()) out.append(entry);
    return;
  }
  if (plain(value)) {
    py::dict entry;
    put(entry, w.name, name);
    put(entry, w.type, type_name(value));
    put(entry, w.value, value);
    out.append(entry);
    return;
  }
  if (value == Py_Ellipsis) {
    py::dict entry;
    put(entry, w.name, name);
    put(entry, w.type, w.ellipsis);
    put(entry, w.value, w.dots);
    out.append(entry);
    return;
  }
  if (PySlice_Check(value)) {
    auto* slice = reinterpret_cast<PySliceObject*>(value);
    PyObject* bounds[3] = {slice->start, slice->stop, slice->step};
    if (plain(bounds[0]) && plain(bounds[1]) && plain(bounds[2])) {
      py::list values;
      for (PyObject* bound : bounds) values.append(py::handle(bound));
      py::dict entry;
      put(entry, w.name, name);
      put(entry, w.type, w.slice);
      put(entry, w.value, values);
      out.append(entry);
      return;
    }
  } else if (PyTuple_Check(value) || PyList_Check(value)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(value);
    PyObject** items = PySequence_Fast_ITEMS(value);
    if (n > s.longest_plain_list) {
      bool all_plain = true;
      for (Py_ssize_t i = 0; i < n && all_plain; ++i) all_plain = plain(items[i]);
      if (all_plain) {
        py::dict entry;
        put(entry, w.name, name);
        put(entry, w.type, type_name(value));
        put(entry, w.length, py::int_(n));
        out.append(entry);
        return;
      }
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
      path.push_back(std::to_string(i));
      describe(s, items[i], side, path, written, out);
      path.pop_back();
    }
    return;
  } else if (PyDict_Check(value)) {
    PyObject *key, *item;
    Py_ssize_t pos = 0;
    while (PyDict_Next(value, &pos, &key, &item)) {
      path.push_back(py::str(key).cast<std::string>());
      describe(s, item, side, path, written, out);
      path.pop_back();
    }
    return;
  }
  // anything else (a dtype, a device, a slice of tensors, another framework's tensor): the recorder's own
  py::tuple where(path.size());
  for (size_t i = 0; i < path.size(); ++i) where[i] = py::str(path[i]);
  py::list made = s.describe_value(side, where, py::handle(value));
  for (auto entry : made) out.append(entry);
}

// The entries of a call's arguments: positional ones by index, keywords by name.
py::list describe_arguments(State& s, PyObject* args, PyObject* kwargs) {
  py::list out;
  std::vector<std::string> path;
  std::string side = "input";
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  for (Py_ssize_t i = 0; i < n; ++i) {
    path.assign(1, std::to_string(i));
    describe(s, PyTuple_GET_ITEM(args, i), side, path, false, out);
  }
  if (kwargs != nullptr) {
    PyObject *key, *item;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &item)) {
      path.assign(1, py::str(key).cast<std::string>());
      describe(s, item, side, path, false, out);
    }
  }
  return out;
}

// The entries of a call's output: each item of a tuple or list by index, else the one value unnumbered.
py::list describe_output(State& s, PyObject* output) {
  py::list out;
  std::vector<std::string> path;
  std::string side = "output";
  if (PyTuple_Check(output) || PyList_Check(output)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(output);
    PyObject** items = PySequence_Fast_ITEMS(output);
    for (Py_ssize_t i = 0; i < n; ++i) {
      path.assign(1, std::to_string(i));
      describe(s, items[i], side, path, true, out);
    }
  } else {
    describe(s, output, side, path, true, out);
  }
  return out;
}

// The entries of a backward's gradients (None where autograd passed none), by index.
py::list describe_grads(State& s, const torch::autograd::variable_list& grads, const std::string& side,
                        bool written) {
  py::list out;
  std::vector<std::string> path;
  for (size_t i = 0; i < grads.size(); ++i) {
    path.assign(1, std::to_string(i));
    if (!grads[i].defined()) {
      describe(s, Py_None, side, path, written, out);
      continue;
    }
    py::object wrapped = py::reinterpret_steal<py::object>(THPVariable_Wrap(grads[i]));
    describe(s, wrapped.ptr(), side, path, written, out);
  }
  return out;
}

// The id of the calling stack: its frames' codes and offsets looked up, worked out once in Python.
py::object stack_id(State& s) {
  if (s.stack_here.is_none()) return py::none();
  std::string key;
  std::vector<PyObject*> codes;
  PyFrameObject* frame = PyEval_GetFrame();
  Py_XINCREF(frame);
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    int offset = PyFrame_GetLasti(frame);
    void* where = code;
    key.append(reinterpret_cast<const char*>(&where), sizeof(where));
    key.append(reinterpret_cast<const char*>(&offset), sizeof(offset));
    codes.push_back(reinterpret_cast<PyObject*>(code));
    Py_DECREF(code);  // the frame holds it
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  auto found = s.stacks.find(key);
  if (found != s.stacks.end()) return found->second;
  for (PyObject* code : codes) s.held_codes.push_back(py::reinterpret_borrow<py::object>(code));
  py::object made = s.stack_here();
  if (made.is_none()) {  // this dump records no stacks: walk no more frames
    s.stack_here = py::none();
    return made;
  }
  s.stacks.emplace(std::move(key), made);
  return made;
}

// Append one held call. Its lists and tuple hold entries of strings and numbers and nothing that could
// lead back to them: they are taken out of the garbage collector's reach (thousands of them can wait
// for the next module call, and a full collection would walk every one, again and again).
void hold(State& s, py::tuple call) {
  for (auto item : call) {
    if (PyList_CheckExact(item.ptr())) PyObject_GC_UnTrack(item.ptr());
  }
  PyObject_GC_UnTrack(call.ptr());
  if (PyList_Append(s.pending.ptr(), call.ptr()) < 0) throw py::error_already_set();
}

// Forget the hooks of nodes autograd has freed, and tell Python which calls they reported (their
// tokens go): a long step keeps only what a live graph can still reach.
void prune_hooks(State& s) {
  py::list dead;
  auto kept = std::remove_if(s.hooks.begin(), s.hooks.end(), [&](const auto& hook) {
    if (!std::get<0>(hook).expired()) return false;
    dead.append(std::get<2>(hook));
    return true;
  });
  s.hooks.erase(kept, s.hooks.end());
  s.prune_hooks_at = std::max(kPruneAt, 2 * s.hooks.size());
  if (PyList_GET_SIZE(dead.ptr()) > 0) hold(s, py::make_tuple(2, dead));
}

void fail(State& s, const char* what) {
  if (s.failed) return;
  s.failed = true;
  try {
    s.on_error(py::str(what));
  } catch (py::error_already_set&) {
    PyErr_Clear();
  }
}

// Run the capture's own work; an exception in it becomes one warning and the dump ends (false).
template <class Work>
bool guarded(State& s, Work&& work) {
  try {
    work();
    return true;
  } catch (py::error_already_set& exc) {
    std::string what = described(exc);
    fail(s, what.c_str());
  } catch (const std::exception& exc) {
    fail(s, exc.what());
  }
  return false;
}

bool recorder_busy(State& s) {
  PyObject* busy = PyObject_GetAttrString(s.recorder.ptr(), "busy");
  if (busy == nullptr) {
    PyErr_Clear();
    return false;
  }
  int truth = PyObject_IsTrue(busy);
  Py_DECREF(busy);
  return truth > 0;
}

struct BackwardHook : torch::autograd::FunctionPostHook {
  BackwardHook(std::shared_ptr<State> state, int64_t call) : state_(std::move(state)), call_(call) {}

  torch::autograd::variable_list operator()(const torch::autograd::variable_list& grad_inputs,
                                            const torch::autograd::variable_list& grad_outputs) override {
    py::gil_scoped_acquire gil;
    State& s = *state_;
    if (!s.installed || s.failed) return grad_inputs;
    s.busy += 1;
    s.in_hook += 1;
    guarded(s, [&] {
      at::AutoGradMode no_grad(false);
      py::list into = describe_grads(s, grad_outputs, "input", false);
      py::list passed = describe_grads(s, grad_inputs, "output", true);
      hold(s, py::make_tuple(1, call_, into, passed));
    });
    s.in_hook -= 1;
    s.busy -= 1;
    return grad_inputs;
  }

  // Under compiled autograd the hook is not traced into the graph (the backward's calls go unseen,
  // which remove() reports): torch's default here raises, and would stop the user's backward.
  void compiled_args(torch::dynamo::autograd::CompiledNodeArgs&) const override {
    state_->under_compiled_autograd = true;
  }

 private:
  std::shared_ptr<State> state_;
  int64_t call_;
};

// The grad_fn that a call made, or none: a call that hands back one of its inputs made none of its own.
NodePtr made_node(PyObject* args, PyObject* output) {
  NodePtr node;
  if (THPVariable_Check(output)) {
    node = THPVariable_Unpack(output).grad_fn();
  } else if (PyTuple_Check(output) || PyList_Check(output)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(output);
    PyObject** items = PySequence_Fast_ITEMS(output);
    for (Py_ssize_t i = 0; i < n && !node; ++i) {
      if (THPVariable_Check(items[i])) node = THPVariable_Unpack(items[i]).grad_fn();
    }
  }
  if (!node) return node;
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* arg = PyTuple_GET_ITEM(args, i);
    if (THPVariable_Check(arg) && THPVariable_Unpack(arg).grad_fn() == node) return NodePtr();
  }
  return node;
}

class Capture {
 public:
  explicit Capture(py::dict setup) : state_(std::make_shared<State>()) {
    State& s = *state_;
    s.names = py::dict();
    s.name_of = setup["name_of"];
    s.recorder = setup["recorder"];
    s.describe_value = setup["describe_value"];
    s.noted = setup["noted_devices"];
    s.note_device = setup["note_device"];
    s.framework = setup["framework"];
    s.pending = py::list();
    s.skipped = setup["skipped_dtypes"];
    s.longest_plain_list = setup["longest_plain_list"].cast<Py_ssize_t>();
    s.python_stats = setup["python_stats"];
    s.neutral_dtype = setup["dtype_name"];
    s.stack_here = setup["stack_here"];
    s.on_full = setup["on_full"];
    s.on_error = setup["on_error"];
    s.plain_types = setup["plain_types"];
    s.raised = setup["raised"];
    s.backward = setup["backward"].cast<bool>();
    uintptr_t address = setup["kernel"].is_none() ? 0 : setup["kernel"].cast<uintptr_t>();
    s.kernel = reinterpret_cast<StatsKernel>(address);
    for (auto item : setup["codes"].cast<py::dict>()) {
      PyObject* dtype = item.first.ptr();
      if (!THPDtype_Check(dtype)) continue;
      s.codes[static_cast<int>(reinterpret_cast<THPDtype*>(dtype)->scalar_type)] = item.second.cast<int>();
    }
  }

  void install() { state_->installed = true; }

  // Stop reporting and remove every grad_fn hook not yet fired.
  // Stop reporting and remove every grad_fn hook not yet gone. From inside one of the hooks (stop()
  // called in a tensor hook) they stay, doing nothing: autograd is walking the list they are in.
  void remove() {
    State& s = *state_;
    s.installed = false;
    if (s.in_hook == 0) {
      for (auto& [weak, key, call] : s.hooks) {
        if (auto node = Weak<NodePtr>::lock(weak)) node->del_post_hook(key);
      }
    }
    s.hooks.clear();
    s.stacks.clear();
    s.held_codes.clear();
    s.seen.clear();
    s.seen_by_memory.clear();
  }

  // Drop every Python object the state holds (the recorder, the capture's bound methods): they refer
  // back to the Python capture that holds this object, a cycle the garbage collector cannot see through.
  void release() {
    State& s = *state_;
    s.installed = false;
    // null handles, not None: a hook left on a live graph may free the state on a thread without the GIL
    for (py::object* held : {&s.names, &s.name_of, &s.recorder, &s.describe_value, &s.python_stats,
                             &s.neutral_dtype, &s.stack_here, &s.on_full, &s.on_error, &s.plain_types,
                             &s.raised, &s.skipped, &s.noted, &s.note_device}) {
      *held = py::object();
    }
    s.pending = s.framework = py::object();
    s.stacks.clear();
    s.held_codes.clear();
    s.seen.clear();
    s.seen_by_memory.clear();
    s.dtype_names.clear();
    s.device_names.clear();
    s.entry_names.clear();
  }

  py::object take() {
    State& s = *state_;
    if (!s.pending) return py::list();
    py::object taken = s.pending;
    s.pending = py::list();
    return taken;
  }

  void set_busy(int delta) { state_->busy += delta; }
  bool under_compiled_autograd() const { return state_->under_compiled_autograd; }

  // How many post hooks the grad_fn of `tensor` holds (what the tests check after stop())
  static size_t post_hooks_on(py::handle tensor) {
    if (!THPVariable_Check(tensor.ptr())) return 0;
    auto node = THPVariable_Unpack(tensor.ptr()).grad_fn();
    return node ? node->post_hooks().size() : 0;
  }
  bool failed() const { return state_->failed; }
  size_t hooks_held() const { return state_->hooks.size(); }

  py::object call(py::handle mode, py::handle func, py::handle types, py::handle args, py::handle kwargs) {
    State& s = *state_;
    py::object options;  // a mapping that is no dict (torch passes dicts) is run as a dict of it
    if (kwargs.ptr() != Py_None && !PyDict_Check(kwargs.ptr())) options = py::dict(py::reinterpret_borrow<py::object>(kwargs));
    PyObject* kw = options ? options.ptr()
                           : (kwargs.ptr() == Py_None || PyDict_GET_SIZE(kwargs.ptr()) == 0) ? nullptr : kwargs.ptr();
    if (!s.installed || s.failed || s.busy || recorder_busy(s)) return run(func, args, kw);
    PyObject* named = PyDict_GetItem(s.names.ptr(), func.ptr());  // borrowed
    py::object name;
    if (named == nullptr) {
      name = s.name_of(func);
      s.names[func] = name;
    } else {
      name = py::reinterpret_borrow<py::object>(named);
    }
    if (name.is_none()) return run(func, args, kw);
    bool grad = at::GradMode::is_enabled();
    int64_t call = s.next_call++;
    py::object inputs, stack;
    s.busy += 1;
    bool described_inputs = guarded(s, [&] {
      at::AutoGradMode no_grad(false);
      inputs = describe_arguments(s, args.ptr(), kw);
      stack = stack_id(s);
    });
    if (!described_inputs) {
      s.busy -= 1;
      return run(func, args, kw);
    }
    py::object output;
    try {
      output = run(func, args, kw);
    } catch (...) {
      hold(s, py::make_tuple(0, name, inputs, stack, s.raised, call));
      s.busy -= 1;
      throw;
    }
    guarded(s, [&] {
      py::object outputs;
      {
        at::AutoGradMode no_grad(false);
        outputs = describe_output(s, output.ptr());
      }
      if (grad && s.backward) {
        auto node = made_node(args.ptr(), output.ptr());
        if (node) {
          uintptr_t key = node->add_post_hook(std::make_unique<BackwardHook>(state_, call));
          s.hooks.emplace_back(WeakNode(node), key, call);
          if (s.hooks.size() > s.prune_hooks_at) prune_hooks(s);
        }
      }
      hold(s, py::make_tuple(0, name, inputs, stack, outputs, call));
    });
    s.busy -= 1;
    if (!s.failed && PyList_GET_SIZE(s.pending.ptr()) >= kFlushAt) {
      guarded(s, [&] { s.on_full(); });  // the call ran: its output goes back even if reporting fails
    }
    return output;
  }

 private:
  static py::object run(py::handle func, py::handle args, PyObject* kwargs) {
    PyObject* result = PyObject_Call(func.ptr(), args.ptr(), kwargs);
    if (result == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(result);
  }

  std::shared_ptr<State> state_;
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "tscore's compiled capture of torch API calls (ts_torch.compiled_capture)";
  py::class_<Capture>(m, "Capture")
      .def(py::init<py::dict>())
      .def("install", &Capture::install)
      .def("remove", &Capture::remove)
      .def("take", &Capture::take)
      .def("release", &Capture::release)
      .def("under_compiled_autograd", &Capture::under_compiled_autograd)
      .def_static("post_hooks_on", &Capture::post_hooks_on)
      .def("set_busy", &Capture::set_busy)
      .def("failed", &Capture::failed)
      .def("hooks_held", &Capture::hooks_held)
      .def("call", &Capture::call, py::arg("mode"), py::arg("func"), py::arg("types"), py::arg("args") = py::tuple(),
           py::arg("kwargs") = py::none());
}
