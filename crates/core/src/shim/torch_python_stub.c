/* An empty shared library named `libtorch_python.so` (build.rs gives it that soname).
 *
 * torchvision's op library (`torchvision/_C.so` in its wheel) lists libtorch_python.so as a
 * dependency although it uses none of its symbols; the real libtorch_python.so needs the Python
 * interpreter's symbols and cannot load in Node. Once this stub is loaded, the dynamic loader
 * takes it as that dependency (it matches by soname), and _C.so's TORCH_LIBRARY registrations
 * run without Python. See src/library.rs. */
typedef int torch_node_python_stub;
