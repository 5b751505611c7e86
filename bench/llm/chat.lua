-- wrk script of bench/run.sh's LLM case: every request is a POST of the
-- chat completion in the file named by the first script argument, with
-- "Authorization: Bearer KEY" when a second argument gives KEY (a client
-- talking to the provider directly or through nginx brings its own key; the
-- gateway adds it itself). Usage: wrk ... -s chat.lua URL -- BODY.json [KEY]
function init(args)
   local path = args[1]
   if not path then
      error("chat.lua: the request body file is the first script argument")
   end
   local f = assert(io.open(path, "rb"))
   wrk.body = f:read("*a")
   f:close()
   wrk.method = "POST"
   wrk.headers["Content-Type"] = "application/json"
   if args[2] and args[2] ~= "" then
      wrk.headers["Authorization"] = "Bearer " .. args[2]
   end
end
