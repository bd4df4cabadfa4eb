//! What a TorchScript method declares (read through `ffi`, used by `value`'s coercion and by
//! `ScriptModule.signature()`). Plain data: no N-API, no libtorch.

/// One argument of a TorchScript method, as its schema declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaArg {
    pub name: String,
    /// TorchScript's annotation string, e.g. `Dict[str, List[float]]`.
    pub type_str: String,
    pub has_default: bool,
}

/// A method's arguments (without `self`) and return type.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodSchema {
    pub args: Vec<SchemaArg>,
    pub returns: String,
}
